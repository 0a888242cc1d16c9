// Deterministic generator of realistic agent conversations for benchmarks: mixed English / Chinese
// prose, code, thinking, tool calls with JSON arguments, tool results, usage marks and checkpoints.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "strata/message/message.h"

namespace strata::bench {

// Returns messages of one agent turn (user, assistant with thinking and tool calls, tool results, reply).
std::vector<Message> MakeTurn(std::mt19937_64& rng, int turn);

// Writes a kimi-cli style context log of at least `target_bytes` to `path` (if it does not already exist
// with that size) and returns its size. Checkpoint and usage records are interleaved as kimi-cli does.
uint64_t EnsureContextLog(const std::string& path, uint64_t target_bytes, uint64_t* messages);

}  // namespace strata::bench
