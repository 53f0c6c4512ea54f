// safetensors.cpp — the safetensors reader: header parsing and validation, tensor loading,
// and the F16/BF16 → float32 conversions. The writer is in safetensors_write.cpp.
//
// The file is read with std::ifstream; every read is preceded by a bounds check against the
// file size measured at open, and every read's byte count is checked (a file truncated after
// open gives an Error, not garbage).
#include "autograd/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "autograd/io/safetensors_dtype.h"
#include "kernels/error.h"

namespace tapegrad {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB too.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

uint64_t file_size_of(std::ifstream& in, const std::string& path) {
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  TG_CHECK(in.good() && size >= 0, "safetensors: '{}': cannot determine the file size (is it a regular file?)", path);
  in.seekg(0, std::ios::beg);
  return static_cast<uint64_t>(size);
}

// Reads exactly n bytes at absolute offset `at`, or throws.
void read_exact(std::ifstream& in, void* dst, uint64_t n, uint64_t at, const std::string& path,
                const std::string& what) {
  if (n == 0) return;
  in.clear();
  in.seekg(static_cast<std::streamoff>(at), std::ios::beg);
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  TG_CHECK(in.good() && static_cast<uint64_t>(in.gcount()) == n,
           "safetensors: '{}': could not read {} bytes at offset {} for {} (got {}; file truncated or changed?)", path,
           n, at, what, in.gcount());
}

// Long strings (keys, parser messages) are cut in error messages.
std::string clip(std::string s, size_t max = 200) { return s.size() <= max ? s : s.substr(0, max - 3) + "..."; }

// A JSON value for an error message: scalars as JSON (cut at 60 characters), arrays and objects by
// their type only (dumping them is recursive: a deeply nested header must not overflow the stack).
std::string describe(const json& v) {
  if (v.is_structured()) return fmt::format("a JSON {}", v.type_name());
  return clip(v.dump(), 60);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size() && i < 10; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() > 10 ? ", ...]" : "]");
}

// a × b, or throws when it does not fit in int64.
int64_t checked_mul(int64_t a, int64_t b, const std::string& path, const std::string& name) {
  TG_CHECK(b == 0 || a <= std::numeric_limits<int64_t>::max() / b,
           "safetensors: '{}': tensor '{}': shape is too large (element count overflows int64)", path, name);
  return a * b;
}

// Parses the header JSON; duplicate keys in any object (tensor names included) are an error
// (nlohmann would silently keep the last one).
json parse_header(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  int duplicate_depth = -1;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && duplicate_depth < 0) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        duplicate = key;
        duplicate_depth = depth;
      }
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, callback);
  } catch (const json::exception& e) {
    throw Error(fmt::format("safetensors: '{}': header is not valid JSON: {}", path, clip(e.what())));
  }
  TG_CHECK(duplicate_depth < 0, "safetensors: '{}': duplicate key '{}' in the header{}", path, clip(duplicate),
           duplicate_depth == 1 ? " (two tensors with the same name)" : "");
  TG_CHECK(j.is_object(), "safetensors: '{}': header is a JSON {}, not an object", path, j.type_name());
  return j;
}

// A JSON integer that is >= 0 and fits in int64, or throws with `what` in the message.
uint64_t get_count(const json& v, const std::string& path, const std::string& name, const char* what) {
  TG_CHECK(v.is_number_integer(), "safetensors: '{}': tensor '{}': {} must be integers, got {}", path, name, what,
           describe(v));
  TG_CHECK(v.is_number_unsigned(), "safetensors: '{}': tensor '{}': {} must be non-negative, got {}", path, name, what,
           describe(v));
  uint64_t u = v.get<uint64_t>();
  TG_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
           "safetensors: '{}': tensor '{}': {} value {} is too large", path, name, what, u);
  return u;
}

const json& field(const json& entry, const char* key, const std::string& path, const std::string& name) {
  auto it = entry.find(key);
  TG_CHECK(it != entry.end(), "safetensors: '{}': tensor '{}': header entry has no \"{}\"", path, name, key);
  return *it;
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& path) {
  TG_CHECK(v.is_object(), "safetensors: '{}': tensor '{}': header entry is a JSON {}, not an object", path, name,
           v.type_name());
  SafetensorsEntry e;
  e.name = name;
  const json& dtype = field(v, "dtype", path, name);
  TG_CHECK(dtype.is_string(), "safetensors: '{}': tensor '{}': \"dtype\" must be a string, got {}", path, name,
           describe(dtype));
  e.dtype = dtype.get<std::string>();
  const detail::StDType* info = detail::find_st_dtype(e.dtype);
  TG_CHECK(info != nullptr, "safetensors: '{}': tensor '{}': unknown dtype \"{}\"", path, name, e.dtype);

  const json& shape = field(v, "shape", path, name);
  TG_CHECK(shape.is_array(), "safetensors: '{}': tensor '{}': \"shape\" must be an array, got {}", path, name,
           describe(shape));
  int64_t numel = 1;
  for (const json& d : shape) {
    e.shape.push_back(static_cast<int64_t>(get_count(d, path, name, "shape values")));
    numel = checked_mul(numel, e.shape.back(), path, name);
  }

  const json& offsets = field(v, "data_offsets", path, name);
  TG_CHECK(offsets.is_array() && offsets.size() == 2,
           "safetensors: '{}': tensor '{}': \"data_offsets\" must be an array [begin, end], got {}", path, name,
           describe(offsets));
  e.begin = get_count(offsets[0], path, name, "data_offsets");
  e.end = get_count(offsets[1], path, name, "data_offsets");
  TG_CHECK(e.begin <= e.end, "safetensors: '{}': tensor '{}': data_offsets [{}, {}] are reversed", path, name, e.begin,
           e.end);
  TG_CHECK(e.end <= data_size,
           "safetensors: '{}': tensor '{}': data_offsets [{}, {}] lie outside the data section ({} bytes)", path, name,
           e.begin, e.end, data_size);
  int64_t nbytes = checked_mul(numel, static_cast<int64_t>(info->size), path, name);
  TG_CHECK(e.end - e.begin == static_cast<uint64_t>(nbytes),
           "safetensors: '{}': tensor '{}': data_offsets [{}, {}] span {} bytes but shape {} of {} needs {} × {} = {}",
           path, name, e.begin, e.end, e.end - e.begin, shape_str(e.shape), e.dtype, numel, info->size, nbytes);
  return e;
}

// Tensors must tile the data section exactly, as the reference implementation requires:
// sorted by offset, each begins where the previous ended, and the last ends at the file's end.
void check_layout(const std::vector<SafetensorsEntry>& entries, uint64_t data_size, const std::string& path) {
  std::vector<const SafetensorsEntry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry* e : order) {
    TG_CHECK(e->begin >= pos, "safetensors: '{}': tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]",
             path, e->name, e->begin, e->end, prev ? prev->name : "", prev ? prev->begin : 0, prev ? prev->end : 0);
    TG_CHECK(e->begin == pos, "safetensors: '{}': tensor '{}': data_offsets [{}, {}] leave a gap of {} bytes at offset {}",
             path, e->name, e->begin, e->end, e->begin - pos, pos);
    pos = e->end;
    prev = e;
  }
  TG_CHECK(pos == data_size, "safetensors: '{}': the data section has {} bytes but the tensors cover only {}", path,
           data_size, pos);
}

}  // namespace

namespace detail {

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in float32
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / nan (payload kept)
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));         // rebias 15 → 127
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

const StDType* find_st_dtype(std::string_view name) {
  static constexpr StDType kTable[] = {
      {"F64", 8, true, DType::Float64},  {"F32", 4, true, DType::Float32},  {"I64", 8, true, DType::Int64},
      {"I32", 4, true, DType::Int32},    {"BOOL", 1, true, DType::Bool},    {"U8", 1, true, DType::Bool},
      {"F16", 2, true, DType::Float32},  {"BF16", 2, true, DType::BFloat16}, {"I8", 1, false, DType::Int32},
      {"I16", 2, false, DType::Int32},   {"U16", 2, false, DType::Int32},   {"U32", 4, false, DType::Int64},
      {"U64", 8, false, DType::Int64},   {"F8_E4M3", 1, false, DType::Float32},
      {"F8_E5M2", 1, false, DType::Float32}, {"F8_E8M0", 1, false, DType::Float32},
      {"C64", 8, false, DType::Float32},
  };
  for (const StDType& d : kTable)
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace detail

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // cannot overflow: checked when the header was parsed
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.is_open(), "safetensors: cannot open '{}': {}", path, std::strerror(errno));
  const uint64_t file_size = file_size_of(in, path);
  TG_CHECK(file_size >= 8, "safetensors: '{}' has {} bytes, fewer than the 8-byte header length", path, file_size);
  unsigned char len_bytes[8];
  read_exact(in, len_bytes, 8, 0, path, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  TG_CHECK(n <= kMaxHeaderBytes, "safetensors: '{}': header length {} exceeds the {}-byte limit", path, n,
           kMaxHeaderBytes);
  TG_CHECK(n <= file_size - 8, "safetensors: '{}': header length {} is larger than the {} bytes after it", path, n,
           file_size - 8);
  std::string text(n, '\0');
  read_exact(in, text.data(), n, 8, path, "the header");
  TG_CHECK(n >= 2 && text[0] == '{', "safetensors: '{}': header does not start with '{{'", path);
  data_start_ = 8 + n;
  const uint64_t data_size = file_size - data_start_;

  json header = parse_header(text, path);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      TG_CHECK(value.is_object(), "safetensors: '{}': \"__metadata__\" must be an object, got {}", path,
               value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        TG_CHECK(mv.is_string(), "safetensors: '{}': \"__metadata__\" value of '{}' must be a string, got {}", path, mk,
                 describe(mv));
        metadata_.emplace(mk, mv.get<std::string>());
      }
    } else {
      entries_.push_back(parse_entry(key, value, data_size, path));
    }
  }
  check_layout(entries_, data_size, path);
  // nlohmann's object is a std::map, so entries_ is already sorted by name.
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == name;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  TG_CHECK(contains(name), "safetensors: '{}': no tensor named '{}' ({} tensors in the file)",
           path_, name, entries_.size());
  return *std::lower_bound(entries_.begin(), entries_.end(), name,
                           [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
}

Tensor SafetensorsFile::load(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const detail::StDType* info = detail::find_st_dtype(e.dtype);
  TG_CHECK(info->loadable, "safetensors: '{}': tensor '{}': dtype {} is not supported by tapegrad "
           "(loadable: F64, F32, I64, I32, BOOL, U8 holding 0/1, F16, BF16)", path_, name, e.dtype);
  TG_CHECK(static_cast<int>(e.shape.size()) <= kMaxDims,
           "safetensors: '{}': tensor '{}': {} dimensions, tapegrad supports at most {}", path_, name, e.shape.size(),
           kMaxDims);
  std::ifstream in(path_, std::ios::binary);
  TG_CHECK(in.is_open(), "safetensors: cannot reopen '{}' to load tensor '{}': {}", path_, name, std::strerror(errno));
  Tensor t = empty(Shape(e.shape), Options(info->as));
  const uint64_t nbytes = e.end - e.begin;
  const std::string what = fmt::format("tensor '{}'", name);
  if (info->size == dtype_size(info->as)) {
    read_exact(in, t.data_ptr(), nbytes, data_start_ + e.begin, path_, what);
    if (info->as == DType::Bool) {  // BOOL and U8 must hold 0/1 only
      const auto* p = static_cast<const unsigned char*>(t.data_ptr());
      for (uint64_t i = 0; i < nbytes; ++i)
        TG_CHECK(p[i] <= 1, "safetensors: '{}': tensor '{}' ({}): element {} is {}; only 0/1 are loaded (as bool)",
                 path_, name, e.dtype, i, static_cast<int>(p[i]));
    }
  } else {  // F16 → float32 (exact)
    std::vector<uint16_t> raw(static_cast<size_t>(e.numel()));
    read_exact(in, raw.data(), nbytes, data_start_ + e.begin, path_, what);
    float* out = t.data<float>();
    for (size_t i = 0; i < raw.size(); ++i) out[i] = detail::half_to_float(raw[i]);
  }
  return t;
}

void SafetensorsFile::read_bytes(const std::string& name, const std::string& dtype, void* dst, uint64_t nbytes) const {
  const SafetensorsEntry& e = entry(name);
  TG_CHECK(e.dtype == dtype, "safetensors: '{}': tensor '{}' is {}, expected {}", path_, name, e.dtype, dtype);
  TG_CHECK(e.end - e.begin == nbytes, "safetensors: '{}': tensor '{}' holds {} bytes, expected {}", path_, name,
           e.end - e.begin, nbytes);
  std::ifstream in(path_, std::ios::binary);
  TG_CHECK(in.is_open(), "safetensors: cannot reopen '{}' to load tensor '{}': {}", path_, name, std::strerror(errno));
  read_exact(in, dst, nbytes, data_start_ + e.begin, path_, fmt::format("tensor '{}'", name));
}

std::map<std::string, Tensor> SafetensorsFile::load_all() const {
  std::map<std::string, Tensor> out;
  for (const auto& e : entries_) out.emplace(e.name, load(e.name));
  return out;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  SafetensorsFile file(path);
  auto tensors = file.load_all();
  if (metadata) *metadata = file.metadata();
  return tensors;
}

}  // namespace tapegrad
