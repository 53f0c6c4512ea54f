// dtype.cpp — names of dtypes and devices.
#include "kernels/dtype.h"

#include "kernels/error.h"

namespace tapegrad {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

std::string Device::str() const {
  return type == DeviceType::CPU ? std::string("cpu") : fmt::format("cuda:{}", index);
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  // cuda:N with N a decimal of at most 6 digits (std::stoi would throw its own out_of_range past int).
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 11 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(s.substr(5)));
  throw Error(fmt::format("device: '{}' is not a device (expected cpu, cuda or cuda:N)", s));
}

}  // namespace tapegrad
