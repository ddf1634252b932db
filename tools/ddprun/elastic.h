// Elastic membership (--nnodes MIN:MAX), as torchrun's rendezvous: each
// round's nodes are whoever came. Every agent adds itself to the round; the
// store host's agent closes it once MAX have come, or at least MIN and no
// other for --rdzv-conf last_call_timeout, and the order of arrival gives
// the node ranks. An agent that came after the close says it waits
// (the running round's agents then restart their workers to admit it, as
// long as the round has fewer than MAX) and joins the next round.
//
// The store host's node must stay: its agent holds the store, so it is the
// one node that cannot leave (as with torchrun's c10d rendezvous backend).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "store/key_store.h"

namespace ddprun {

struct Admission {
  int node_rank = 0;
  int nodes = 0;  // 0: the job finished; no round comes
};

struct ElasticRound {
  int min_nodes = 1, max_nodes = 1;
  std::chrono::milliseconds last_call{0}, timeout{0};
  bool closer = false;  // the store host's agent
  std::string where;    // the store's address, for messages
};

// This agent's place in the round whose keys `round` holds, or nothing when
// it came after the round closed (it is then counted as waiting there).
// Status::Timeout when the round has not closed within the timeout, saying
// how many of MIN came.
std::optional<Admission> join_elastic_round(ddp::core::KeyStore& round, const ElasticRound& r);

// After the job finished: the round (the one after the last) closes with
// no node, so that agents waiting for it learn that none comes; waits up to
// `bound` for each of them to have read it (the store ends with its host).
void close_round_for_good(ddp::core::KeyStore& round, std::chrono::milliseconds bound);

// How many agents wait to join after the round whose keys `round` holds.
int64_t nodes_waiting(ddp::core::KeyStore& round);

// The newest round the closer opened (0 before any), for an agent that
// starts while the job runs; and the closer's record of it.
int newest_round(ddp::core::KeyStore& job);
void open_round(ddp::core::KeyStore& job, int round);

}  // namespace ddprun
