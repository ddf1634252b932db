// Where ranks and ddprun's agents meet in a store: the keys a job keeps
// there and the arrival count that precedes every group. Written once over
// KeyStore, so a rank (through c10d's TCPStore) and an agent (through the
// wire client, without LibTorch) run the same protocol.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/key_store.h"

namespace ddp::core {

// The prefix of one job's keys on a store: the launcher's job id ("world"
// without one) and the restart round.
std::string job_key_prefix(const std::string& job_id, int restart);

// Asked while a rank waits for the others to arrive: a reason ends the wait
// (Status::PeerFailed), e.g. a rank that this process started has ended and
// will never arrive. Empty: wait for the whole timeout.
using GiveUp = std::function<std::optional<std::string>()>;

// Every member of `store`'s prefix adds itself to a counter; returns once all
// `size` have (true on the one that arrived last), or throws Status::Timeout
// saying how many of how many arrived.
bool count_in(KeyStore& store, int size, std::chrono::milliseconds timeout, const std::string& where,
              const GiveUp& give_up = {});

// count_in under the store's current generation, which every rank agrees on
// whatever failed before; returns that generation.
int64_t join_generation(const std::shared_ptr<KeyStore>& base, int size, std::chrono::milliseconds timeout,
                        const std::string& where, const GiveUp& give_up = {});

// Before its first rendezvous a rank records that it joins ("joined/<rank>"
// and a count, under the job's prefix). A launcher reads them to tell a rank
// that ended with 0 before joining (the others would wait for it until their
// timeout) from one that finished its work.
void announce_joining(KeyStore& job, int rank);
bool has_joined(KeyStore& job, int rank);
int64_t ranks_joining(KeyStore& job);

}  // namespace ddp::core
