// ddprun's elastic rounds (tools/ddprun/elastic.cpp) against a real store
// server: what a round's keys hold when a process other than ddprun wrote
// them (the store's port is open to anyone on the network).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "elastic.h"
#include "launch/supervisor.h"
#include "store/wire_client.h"
#include "store/wire_server.h"

namespace {
using namespace ddp::core;
using Millis = std::chrono::milliseconds;

ddp::core::Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Store {
  Store() {
    int port = 0;
    server = std::make_unique<WireStoreServer>(launch::listen_socket("127.0.0.1", 0, &port));
    client = std::make_shared<WireStoreClient>("127.0.0.1", server->port(), Millis(3000));
  }
  std::unique_ptr<WireStoreServer> server;
  std::shared_ptr<WireStoreClient> client;
};

ddprun::ElasticRound joiner() {
  ddprun::ElasticRound r;
  r.min_nodes = 1;
  r.max_nodes = 4;
  r.timeout = Millis(3000);
  r.where = "127.0.0.1";
  return r;
}

// Each value was taken by std::stoll (which named nothing but "stoll", or
// made a round of -5 or 10^19 nodes); every one is refused by name now.
TEST(ElasticRound, ForeignValuesInARoundsKeysAreRefusedByName) {
  Store s;
  int n = 0;
  const std::string control("\x01\x02", 2);
  for (const std::string& bad :
       std::vector<std::string>{"abc", "-5", "99999999999999999999", "3x", "", "4294967297", control}) {
    PrefixKeys round("round" + std::to_string(++n), s.client);
    round.set("closed", b(bad));
    try {
      ddprun::join_elastic_round(round, joiner());
      ADD_FAILURE() << "took '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::State) << e.what();
      const std::string shown = bad == control ? "??" : bad;
      EXPECT_NE(std::string(e.what()).find("key 'closed' holds '" + shown + "', not a number from 0 to 2147483647"),
                std::string::npos)
          << e.what();
    }
  }
  PrefixKeys job("job", s.client);
  job.set("open_round", b("-1"));
  try {
    ddprun::newest_round(job);
    ADD_FAILURE() << "took -1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'open_round' holds '-1'"), std::string::npos) << e.what();
  }
  // What ddprun writes is taken: a round closed at 2 nodes, this agent the first.
  PrefixKeys round("round-ok", s.client);
  round.set("closed", b("2"));
  auto a = ddprun::join_elastic_round(round, joiner());
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->node_rank, 0);
  EXPECT_EQ(a->nodes, 2);
  job.set("open_round", b("7"));
  EXPECT_EQ(ddprun::newest_round(job), 7);
}

}  // namespace
