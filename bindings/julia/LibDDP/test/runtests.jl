# LibDDP.jl tests (run where a `julia` is installed; see README): option
# checks and statistics on one process, then 2 ranks through ddprun.
# Environment: LIBDDP (path of libddp.so), DDPRUN (path of ddprun).
using Test
using LibDDP

@testset "LibDDP" begin
    @test startswith(LibDDP.version(), "0.")
    o = LibDDP.powersgd_options()
    @test (o.matrix_approximation_rank, o.start_powersgd_iter, o.use_error_feedback) == (1, 1000, 1)
    o.start_powersgd_iter = 1
    e = try
        LibDDP.powersgd_hook(o)
        nothing
    catch err
        err
    end
    @test e isa LibDDP.DDPError && e.status == LibDDP.DDP_E_INVALID_ARGUMENT && occursin("start_powersgd_iter", e.message)
    @test LibDDP.compression_stats(LibDDP.powersgd_hook()) == (0, 0, 0)

    ddprun = get(ENV, "DDPRUN", "ddprun")
    script = joinpath(@__DIR__, "two_ranks.jl")
    project = dirname(@__DIR__)
    out = read(`$ddprun --standalone --nproc-per-node 2 $(Base.julia_cmd()) --project=$project $script`, String)
    @test occursin("rank 0 ok", out) && occursin("rank 1 ok", out)
end
