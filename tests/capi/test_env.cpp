// Cluster environment detection tables, through the C API.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <ddp/ddp.h>

#include "capi_test_util.h"

namespace {

struct Want {
  const char* name;
  int rank, world, local_rank, local_world, node_rank;
  const char* addr;
  int port;
};

struct Case {
  const char* label;
  std::vector<std::string> vars;
  const char* force;  // NULL: detect
  Want want;
};

void check_case(const Case& c) {
  std::vector<const char*> vars;
  for (auto& v : c.vars) vars.push_back(v.c_str());
  vars.push_back(nullptr);
  ddp_env* e = nullptr;
  ASSERT_EQ(ddp_env_from_vars(&e, vars.data(), c.force), DDP_OK) << c.label << ": " << ddp_last_error_message();
  EXPECT_STREQ(ddp_env_name(e), c.want.name) << c.label;
  EXPECT_EQ(ddp_env_rank(e), c.want.rank) << c.label;
  EXPECT_EQ(ddp_env_world_size(e), c.want.world) << c.label;
  EXPECT_EQ(ddp_env_local_rank(e), c.want.local_rank) << c.label;
  EXPECT_EQ(ddp_env_local_world_size(e), c.want.local_world) << c.label;
  EXPECT_EQ(ddp_env_node_rank(e), c.want.node_rank) << c.label;
  EXPECT_STREQ(ddp_env_master_addr(e), c.want.addr) << c.label;
  EXPECT_EQ(ddp_env_master_port(e), c.want.port) << c.label;
  ddp_env_free(e);
}

TEST(EnvDetect, Table) {
  const std::vector<Case> cases = {
      {"empty environment is lightning, one process", {}, nullptr,
       {"lightning", 0, 1, 0, 1, 0, "127.0.0.1", 0}},
      {"lightning popen child",
       {"MASTER_ADDR=10.0.0.5", "MASTER_PORT=29500", "WORLD_SIZE=4", "LOCAL_RANK=3"}, nullptr,
       {"lightning", 3, 4, 3, 4, 0, "10.0.0.5", 29500}},
      {"lightning two nodes",
       {"MASTER_PORT=1234", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "LOCAL_RANK=1", "NODE_RANK=1"}, nullptr,
       {"lightning", 3, 4, 1, 2, 1, "127.0.0.1", 1234}},
      {"lightning GROUP_RANK as node rank",
       {"MASTER_PORT=1234", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "LOCAL_RANK=0", "GROUP_RANK=1"}, nullptr,
       {"lightning", 2, 4, 0, 2, 1, "127.0.0.1", 1234}},
      {"lightning explicit RANK", {"MASTER_PORT=1234", "WORLD_SIZE=2", "RANK=1"}, nullptr,
       {"lightning", 1, 2, 0, 2, 0, "127.0.0.1", 1234}},
      {"torchelastic wins over slurm",
       {"RANK=5", "GROUP_RANK=1", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=8",
        "MASTER_ADDR=host0", "MASTER_PORT=29400", "SLURM_NTASKS=8", "SLURM_PROCID=0"}, nullptr,
       {"torchelastic", 5, 8, 1, 4, 1, "host0", 29400}},
      {"slurm with node ranges",
       {"SLURM_NTASKS=8", "SLURM_PROCID=6", "SLURM_LOCALID=2", "SLURM_NODEID=1", "SLURM_NNODES=2",
        "SLURM_NODELIST=node[01-04,07],gpu2", "SLURM_JOB_ID=1234567"}, nullptr,
       {"slurm", 6, 8, 2, 4, 1, "node01", 15000 + 4567}},
      {"slurm plain list, MASTER_PORT wins",
       {"SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NODEID=1",
        "SLURM_NODELIST=alpha,beta", "SLURM_JOB_ID=42", "MASTER_PORT=30000"}, nullptr,
       {"slurm", 1, 2, 0, 2, 1, "alpha", 30000}},
      {"slurm single-number range, short job id",
       {"SLURM_NTASKS=1", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
        "SLURM_NODELIST=gpu[7]", "SLURM_JOB_ID=42"}, nullptr,
       {"slurm", 0, 1, 0, 1, 0, "gpu7", 15042}},
      {"slurm interactive shell is not slurm",
       {"SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_JOB_NAME=bash", "SLURM_LOCALID=0", "SLURM_NODEID=0"},
       nullptr, {"lightning", 0, 1, 0, 1, 0, "127.0.0.1", 0}},
      {"open mpi",
       {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "OMPI_COMM_WORLD_LOCAL_SIZE=4", "MASTER_ADDR=head"}, nullptr,
       {"mpi", 5, 8, 1, 4, 1, "head", 29500}},
      {"pmi (mpich / intel mpi)",
       {"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", "MASTER_PORT=2000"}, nullptr,
       {"mpi", 3, 4, 1, 2, 1, "127.0.0.1", 2000}},
      {"kubeflow only on request",
       {"KUBERNETES_PORT=tcp://1.2.3.4:443", "MASTER_ADDR=job-master-0", "MASTER_PORT=23456",
        "WORLD_SIZE=3", "RANK=2"}, "kubeflow",
       {"kubeflow", 2, 3, 0, 1, 2, "job-master-0", 23456}},
      {"kubeflow not auto-detected",
       {"KUBERNETES_PORT=tcp://1.2.3.4:443", "MASTER_ADDR=m", "MASTER_PORT=23456", "WORLD_SIZE=3", "RANK=2"},
       nullptr, {"lightning", 2, 3, 0, 3, 0, "m", 23456}},
  };
  for (auto& c : cases) check_case(c);
}

TEST(EnvDetect, Lsf) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string path = testing::TempDir() + "/ddp_rankfile";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f, "launchnode\nothernode\nothernode\n%s\n%s\n", host, host);
  std::fclose(f);
  std::string rf = "LSB_DJOB_RANKFILE=" + path;
  check_case({"lsf",
              {"LSB_JOBID=123456", rf, "JSM_NAMESPACE_LOCAL_RANK=1", "JSM_NAMESPACE_SIZE=4",
               "JSM_NAMESPACE_RANK=3"},
              nullptr,
              {"lsf", 3, 4, 1, 2, 1, "othernode", 10000 + 456}});
}

struct Bad {
  std::vector<std::string> vars;
  const char* force;
  const char* must_mention;
};

TEST(EnvDetect, MalformedValuesNameTheVariable) {
  const std::vector<Bad> bad = {
      {{"WORLD_SIZE=abc", "MASTER_PORT=1"}, nullptr, "WORLD_SIZE='abc'"},
      {{"WORLD_SIZE=2", "RANK=2", "MASTER_PORT=1"}, nullptr, "RANK='2'"},
      {{"WORLD_SIZE=2", "RANK=-1", "MASTER_PORT=1"}, nullptr, "RANK='-1'"},
      {{"WORLD_SIZE=2", "MASTER_PORT=-5"}, nullptr, "MASTER_PORT='-5'"},
      {{"WORLD_SIZE=2", "MASTER_PORT=70000"}, nullptr, "MASTER_PORT='70000'"},
      {{"WORLD_SIZE=2"}, nullptr, "MASTER_PORT is not set"},
      {{"WORLD_SIZE=0", "MASTER_PORT=1"}, nullptr, "WORLD_SIZE='0'"},
      {{"WORLD_SIZE=2 x", "MASTER_PORT=1"}, nullptr, "WORLD_SIZE='2 x'"},
      {{"SLURM_NTASKS=2", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NODELIST="},
       nullptr, "SLURM_NODELIST=''"},
      {{"SLURM_NTASKS=2", "SLURM_PROCID=2", "SLURM_LOCALID=0", "SLURM_NODEID=0"}, nullptr, "SLURM_PROCID='2'"},
      {{"SLURM_NTASKS=two", "SLURM_PROCID=0"}, nullptr, "SLURM_NTASKS='two'"},
      {{"SLURM_NTASKS=2", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_JOB_ID=12ab"},
       nullptr, "SLURM_JOB_ID"},
      {{"RANK=0", "GROUP_RANK=0", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "WORLD_SIZE=1", "MASTER_PORT=1"},
       nullptr, "MASTER_ADDR is not set"},
      {{"OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=4"}, nullptr, "OMPI_COMM_WORLD_RANK='4'"},
      {{"LSB_JOBID=1", "LSB_DJOB_RANKFILE=", "JSM_NAMESPACE_LOCAL_RANK=0", "JSM_NAMESPACE_SIZE=1",
        "JSM_NAMESPACE_RANK=0"}, nullptr, "LSB_DJOB_RANKFILE=''"},
      {{"KUBERNETES_PORT=x", "MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=2"}, "kubeflow", "RANK is not set"},
      {{}, "nosuchcluster", "nosuchcluster"},
      {{"NOEQUALSIGN"}, nullptr, "NOEQUALSIGN"},
  };
  for (auto& b : bad) {
    std::vector<const char*> vars;
    for (auto& v : b.vars) vars.push_back(v.c_str());
    vars.push_back(nullptr);
    ddp_env* e = reinterpret_cast<ddp_env*>(0x1);
    EXPECT_EQ(ddp_env_from_vars(&e, vars.data(), b.force), DDP_E_INVALID_ARGUMENT) << b.must_mention;
    EXPECT_EQ(e, nullptr);
    EXPECT_NE(std::string(ddp_last_error_message()).find(b.must_mention), std::string::npos)
        << "message '" << ddp_last_error_message() << "' should mention " << b.must_mention;
  }
}

TEST(EnvDetect, ProcessEnvironmentAndExplicit) {
  setenv("WORLD_SIZE", "1", 1);
  ddp_env* e = nullptr;
  ASSERT_EQ(ddp_env_detect(&e), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(ddp_env_world_size(e), 1);
  ddp_env_free(e);
  ASSERT_EQ(ddp_env_new(&e, 1, 4, 1, 2, 0, "h", 99), DDP_OK);
  EXPECT_STREQ(ddp_env_name(e), "explicit");
  ddp_env_free(e);
  EXPECT_EQ(ddp_env_new(&e, 4, 4, 0, 1, 0, nullptr, 99), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_env_rank(nullptr), -1);
  ddp_env_free(nullptr);
}

}  // namespace
