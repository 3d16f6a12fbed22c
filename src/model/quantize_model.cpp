#include "model/quantize_model.h"

#include <vector>

#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/cpu/quantize.h"

namespace tokamak {
namespace {

// GGML's llama_ftype of the "mostly <type>" file we write.
int32_t quantized_file_type(DType target) {
  const auto t = gguf_file_type(target);
  if (!t) throw Error("cannot quantize to " + std::string(dtype_name(target)));
  return static_cast<int32_t>(*t);
}

std::vector<uint8_t> convert(const gguf::TensorInfo& t, DType target) {
  const int64_t row = t.shape[0];
  const int64_t rows = t.n_elements() / row;
  const size_t in_row_bytes = row_bytes(t.dtype, row);
  const size_t out_row_bytes = row_bytes(target, row);
  std::vector<uint8_t> out(out_row_bytes * static_cast<size_t>(rows));
  std::vector<float> buf(static_cast<size_t>(row));
  for (int64_t r = 0; r < rows; ++r) {
    cpu::dequantize_row(t.dtype, t.data + r * in_row_bytes, buf.data(), row);
    cpu::quantize_row(target, buf.data(), out.data() + r * out_row_bytes, row);
  }
  return out;
}

// The type a matrix whose rows are not whole K-quant super-blocks (576 wide, say) is written
// in instead: the 32-element type of about the same bits per weight, as llama-quantize does.
DType fallback_of(DType target) {
  switch (target) {
    case DType::Q4_K:
      return DType::Q5_0;
    case DType::Q5_K:
      return DType::Q5_1;
    case DType::Q6_K:
      return DType::Q8_0;
    default:
      return target;
  }
}

}  // namespace

QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path,
                              DType target) {
  const int32_t file_type = quantized_file_type(target);
  if (!cpu::can_quantize(target)) {
    throw Error("cannot quantize to " + std::string(dtype_name(target)));
  }
  const auto in = gguf::File::open(in_path);
  gguf::Writer writer(in.version(), in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key != "general.alignment") writer.set(key, value);
  }
  writer.set("general.file_type", gguf::Value::u32(static_cast<uint32_t>(file_type)));

  QuantizeReport report;
  for (const auto& t : in.tensors()) {
    report.bytes_in += t.nbytes;
    const bool matrix = t.shape.size() >= 2;
    if (!matrix || t.dtype == target) {
      writer.add_tensor(t.name, t.shape, t.dtype, std::vector<uint8_t>(t.data, t.data + t.nbytes));
      report.bytes_out += t.nbytes;
      ++report.tensors_kept;
      continue;
    }
    if (!dtype_info(t.dtype).supported) {
      throw Error(in_path + ": tensor '" + t.name + "' has type " +
                  std::string(dtype_name(t.dtype)) + ", which cannot be dequantized yet");
    }
    DType type = target;
    if (t.shape[0] % dtype_info(type).block_size != 0 && fallback_of(target) != target) {
      type = fallback_of(target);
      ++report.tensors_fallback;
    }
    if (t.shape[0] % dtype_info(type).block_size != 0) {
      throw Error(in_path + ": tensor '" + t.name + "' row of " + std::to_string(t.shape[0]) +
                  " is not a multiple of the " + std::string(dtype_name(type)) + " block size");
    }
    if (t.dtype == type) {
      writer.add_tensor(t.name, t.shape, t.dtype, std::vector<uint8_t>(t.data, t.data + t.nbytes));
      report.bytes_out += t.nbytes;
      ++report.tensors_kept;
      continue;
    }
    auto data = convert(t, type);
    report.bytes_out += data.size();
    writer.add_tensor(t.name, t.shape, type, std::move(data));
    ++report.tensors_converted;
  }
  writer.write(out_path);
  return report;
}

}  // namespace tokamak
