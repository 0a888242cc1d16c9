// What an image, audio or video part costs a prompt, estimated (tokenizer/message_counter.h,
// EstimateMediaTokens): providers bill media by size, not by any text a tokenizer could count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "strata/tokenizer/message_counter.h"
#include "strata/util/base64.h"

namespace strata::tokenizer {
namespace {

// The payload of a base64 data: URL ("data:image/png;base64,...."), or nullopt.
std::optional<std::string_view> DataPayload(std::string_view url) {
  if (!url.starts_with("data:")) return std::nullopt;
  size_t comma = url.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  std::string_view head = url.substr(0, comma);
  if (head.size() < 7 || head.substr(head.size() - 7) != ";base64") return std::nullopt;
  return url.substr(comma + 1);
}

// The first `n` bytes a base64 payload decodes to (fewer if it is shorter or damaged).
std::string DecodePrefix(std::string_view payload, size_t n) {
  size_t chars = std::min(payload.size(), (n + 2) / 3 * 4);
  chars -= chars % 4;
  bool ok = true;
  std::string out = Base64Decode(payload.substr(0, chars), &ok);
  return out;
}

uint32_t Big16(const std::string& b, size_t at) {
  return (static_cast<uint8_t>(b[at]) << 8) | static_cast<uint8_t>(b[at + 1]);
}
uint32_t Big32(const std::string& b, size_t at) { return (Big16(b, at) << 16) | Big16(b, at + 2); }
uint32_t Little16(const std::string& b, size_t at) {
  return static_cast<uint8_t>(b[at]) | (static_cast<uint8_t>(b[at + 1]) << 8);
}
uint32_t Little24(const std::string& b, size_t at) { return Little16(b, at) | (static_cast<uint8_t>(b[at + 2]) << 16); }

// An image's width and height from its first bytes (PNG, GIF, WebP, JPEG), or nullopt.
std::optional<std::pair<uint32_t, uint32_t>> ImageSize(const std::string& b) {
  if (b.size() >= 24 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0 && b.compare(12, 4, "IHDR") == 0) {
    return std::make_pair(Big32(b, 16), Big32(b, 20));
  }
  if (b.size() >= 10 && (b.compare(0, 6, "GIF87a") == 0 || b.compare(0, 6, "GIF89a") == 0)) {
    return std::make_pair(Little16(b, 6), Little16(b, 8));
  }
  if (b.size() >= 30 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0) {
    if (b.compare(12, 4, "VP8X") == 0) return std::make_pair(Little24(b, 24) + 1, Little24(b, 27) + 1);
    if (b.compare(12, 4, "VP8L") == 0 && b.size() >= 25) {
      uint32_t bits = static_cast<uint8_t>(b[21]) | (static_cast<uint8_t>(b[22]) << 8) |
                      (static_cast<uint8_t>(b[23]) << 16) | (static_cast<uint32_t>(static_cast<uint8_t>(b[24])) << 24);
      return std::make_pair((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1);
    }
    if (b.compare(12, 4, "VP8 ") == 0) return std::make_pair(Little16(b, 26) & 0x3FFF, Little16(b, 28) & 0x3FFF);
  }
  if (b.size() >= 4 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8) {
    // JPEG: the frame header (SOF0..SOF15 but DHT, JPG and DAC) after the segments before it.
    size_t at = 2;
    while (at + 9 < b.size()) {
      if (static_cast<uint8_t>(b[at]) != 0xFF) return std::nullopt;
      uint8_t marker = static_cast<uint8_t>(b[at + 1]);
      if (marker == 0xFF) {
        ++at;
        continue;
      }
      uint32_t length = Big16(b, at + 2);
      if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
        return std::make_pair(Big16(b, at + 7), Big16(b, at + 5));
      }
      if (length < 2) return std::nullopt;
      at += 2 + length;
    }
  }
  return std::nullopt;
}

// OpenAI's published rule for an image: 85 tokens at low detail; otherwise the image fitted within
// 2048 x 2048, its shorter side brought down to 768, and 170 tokens for each 512-pixel tile it covers.
int64_t ImageTokens(uint32_t width, uint32_t height) {
  double w = width, h = height;
  if (w <= 0 || h <= 0) return EncodingMessageCounter::kUnknownImageTokens;
  double fit = std::min(1.0, 2048.0 / std::max(w, h));
  w *= fit;
  h *= fit;
  double shorter = std::min(w, h);
  if (shorter > 768) {
    w *= 768 / shorter;
    h *= 768 / shorter;
  }
  int64_t tiles = static_cast<int64_t>(std::ceil(w / 512)) * static_cast<int64_t>(std::ceil(h / 512));
  return 85 + 170 * tiles;
}

}  // namespace

int64_t EstimateMediaTokens(const MediaPart& part) {
  std::optional<std::string_view> payload = DataPayload(part.url);
  if (part.kind == MediaKind::kImage) {
    if (part.detail && *part.detail == "low") return 85;
    if (payload) {
      if (auto size = ImageSize(DecodePrefix(*payload, 64 << 10))) return ImageTokens(size->first, size->second);
    }
    return EncodingMessageCounter::kUnknownImageTokens;
  }
  // Audio and video: by the bytes carried (about 10 tokens a second of audio at 16 kB/s), at least a
  // floor; a URL alone says nothing of its length.
  const int64_t floor = part.kind == MediaKind::kAudio ? 100 : 1000;
  if (!payload) return floor;
  const int64_t bytes = static_cast<int64_t>(payload->size()) / 4 * 3;
  return std::max(floor, bytes / (part.kind == MediaKind::kAudio ? 1600 : 800));
}

}  // namespace strata::tokenizer
