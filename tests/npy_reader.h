// npy_reader.h — a tiny, bounds-checked NumPy .npy reader for the tests (CS336 fixtures).
// Supports format versions 1.0–3.0, little-endian C-order '<f4', '<f8', '<i8' (→ float32, float64,
// int64). Anything else — bad magic, truncated header or data, Fortran order, other dtypes, a
// shape that does not match the data size — throws tapegrad::Error naming the file. Assumes a
// little-endian host (the data is copied as is).
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::testing {

inline Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "read_npy: cannot open '{}'", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TG_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0, "read_npy: '{}' is not a .npy file", path);
  const auto u8 = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
  const uint32_t major = u8(6);
  TG_CHECK(major >= 1 && major <= 3, "read_npy: '{}': unsupported format version {}", path, major);
  size_t header_start = 10, header_len = u8(8) | (u8(9) << 8);
  if (major >= 2) {
    TG_CHECK(bytes.size() >= 12, "read_npy: '{}': truncated header", path);
    header_start = 12;
    header_len = u8(8) | (u8(9) << 8) | (u8(10) << 16) | (u8(11) << 24);
  }
  TG_CHECK(header_len <= bytes.size() - header_start, "read_npy: '{}': header runs past the end of the file", path);
  const std::string header = bytes.substr(header_start, header_len);
  const size_t data_start = header_start + header_len;

  // The value after 'key': in the header's Python dict literal.
  const auto value_after = [&](const std::string& key) {
    const size_t k = header.find("'" + key + "'");
    TG_CHECK(k != std::string::npos, "read_npy: '{}': header has no '{}'", path, key);
    size_t v = header.find(':', k);
    TG_CHECK(v != std::string::npos, "read_npy: '{}': malformed header", path);
    ++v;
    while (v < header.size() && header[v] == ' ') ++v;
    return v;
  };
  size_t d = value_after("descr");
  TG_CHECK(d < header.size() && header[d] == '\'', "read_npy: '{}': malformed descr", path);
  const size_t d_end = header.find('\'', d + 1);
  TG_CHECK(d_end != std::string::npos, "read_npy: '{}': malformed descr", path);
  const std::string descr = header.substr(d + 1, d_end - d - 1);
  DType dtype;
  size_t item_size;
  if (descr == "<f4") {
    dtype = kFloat32, item_size = 4;
  } else if (descr == "<f8") {
    dtype = kFloat64, item_size = 8;
  } else if (descr == "<i8") {
    dtype = kInt64, item_size = 8;
  } else {
    throw Error(fmt::format("read_npy: '{}': unsupported dtype '{}' (only <f4, <f8, <i8)", path, descr));
  }
  const size_t f = value_after("fortran_order");
  TG_CHECK(header.compare(f, 5, "False") == 0, "read_npy: '{}': Fortran order is not supported", path);

  size_t s = value_after("shape");
  TG_CHECK(s < header.size() && header[s] == '(', "read_npy: '{}': malformed shape", path);
  const size_t s_end = header.find(')', s);
  TG_CHECK(s_end != std::string::npos, "read_npy: '{}': malformed shape", path);
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (size_t i = s + 1; i < s_end;) {
    if (header[i] == ' ' || header[i] == ',') { ++i; continue; }
    TG_CHECK(header[i] >= '0' && header[i] <= '9', "read_npy: '{}': malformed shape", path);
    int64_t dim = 0;
    for (; i < s_end && header[i] >= '0' && header[i] <= '9'; ++i) {
      TG_CHECK(dim < (int64_t{1} << 40), "read_npy: '{}': dimension too large", path);
      dim = dim * 10 + (header[i] - '0');
    }
    dims.push_back(dim);
    TG_CHECK(dims.size() <= 8 && (dim == 0 || numel <= (int64_t{1} << 40) / dim), "read_npy: '{}': shape too large",
             path);
    numel *= dim;
  }
  TG_CHECK(bytes.size() - data_start == static_cast<size_t>(numel) * item_size,
           "read_npy: '{}': {} data bytes for {} elements of {} bytes", path, bytes.size() - data_start, numel,
           item_size);
  Tensor t = empty(Shape(dims), Options(dtype));
  if (numel > 0) std::memcpy(t.data_ptr(), bytes.data() + data_start, static_cast<size_t>(numel) * item_size);
  return t;
}

}  // namespace tapegrad::testing
