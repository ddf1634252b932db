// Gloo's transport throws some errors on its own threads, where nothing
// catches them: a peer that sends more bytes than this rank posted (ranks
// called a collective with different sizes) ends in std::terminate and kills
// the process. The guard turns that into a status instead: a terminate
// handler that recognises a Gloo exception (by type, not by text) parks the
// thread that threw it and records the failure; every wait in progress then
// fails with Status::PeerFailed, which breaks its group and is published to
// the other ranks. Any other exception goes to the previous handler.
#pragma once

#include <cstdint>
#include <string>

namespace ddp::core {

// Installs the handler once (idempotent, thread-safe).
void install_gloo_guard();

// How many Gloo threads have failed so far; a wait compares it with the
// count when it started.
uint64_t gloo_failures();
// What the latest one said.
std::string last_gloo_failure();

}  // namespace ddp::core