// What of a torch.save pickle libddp lets LibTorch's unpickler see: a walk
// over the opcodes that builds nothing, without LibTorch, so that it can be
// fuzzed on its own (fuzz/targets/fuzz_pickle_filter.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace ddp::core {

// The deepest nesting of containers a pickle may hold. Python's pickler
// recurses once per level (torch.save cannot write past its recursion
// limit of 1000), LibTorch's too, and freeing a nested value recurses once
// per level: a 2 MB pickle of a million nested lists ended the reading
// process on a stack overflow.
constexpr size_t kMaxPickleNesting = 1000;

// Walks the pickle's opcodes (protocol 2, what torch.save writes and
// LibTorch reads) and throws Status::IO, naming the file `name` and what
// was wrong, at the first thing LibTorch must not be given: a global that
// is not data, an opcode torch.save does not write, containers nested
// deeper than kMaxPickleNesting, a container that holds itself or is
// changed after a reference to it was made, a memo entry never stored or
// stored out of order, or bytes that end inside an opcode.
//
// Returns the pickle to unpickle: the same opcodes, with three rewrites that
// LibTorch's unpickler needs for what Python writes (see the definition).
std::string filter_pickle(const std::string& pkl, const std::string& name);

}  // namespace ddp::core
