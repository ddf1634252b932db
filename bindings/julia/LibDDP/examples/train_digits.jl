# The main job from Julia: the digits MLP trained through libddp's strategy,
# the calls of examples/c/train_digits.c (written and statically checked:
# no Julia runtime on the machines this is tested on; see the README).
#
#   .venv/bin/python examples/digits/export_digits.py build/digits
#   LIBDDP=build/capi/libddp.so build/tools/ddprun --standalone --nproc-per-node 2 \
#       julia --project=bindings/julia/LibDDP bindings/julia/LibDDP/examples/train_digits.jl build/digits
#
# DIGITS_STEP_LOG=FILE: rank 0 writes each step's loss there.
using LibDDP
using Printf

const FEATURES, CLASSES, BATCH = 64, 10, 32

read_array(path, T) = reinterpret(T, read(path)) |> collect

function main(dir::AbstractString; epochs::Integer=20)
    started = time()
    # Column-major features x samples: the module sees samples x features.
    train_x = reshape(read_array(joinpath(dir, "train_x.f32"), Float32), FEATURES, :)
    train_y = read_array(joinpath(dir, "train_y.i64"), Int64)
    test_x = reshape(read_array(joinpath(dir, "test_x.f32"), Float32), FEATURES, :)
    test_y = read_array(joinpath(dir, "test_y.i64"), Int64)

    s = LibDDP.Strategy(devices=0, state_dict_prefix="net.")
    LibDDP.setup_environment!(s)
    rank, world = LibDDP.global_rank(s), LibDDP.world_size(s)
    m = LibDDP.setup_module!(s, LibDDP.Module(joinpath(dir, "mlp.pt")))
    opt = LibDDP.sgd(m; lr=0.05, momentum=0.9)
    n = length(train_y)
    batches = cld(LibDDP.sampler_num_samples(n, world), BATCH)
    log_path = get(ENV, "DIGITS_STEP_LOG", "")
    step_log = rank == 0 && !isempty(log_path) ? open(log_path, "w") : nothing
    steps = 0
    for epoch in 0:epochs-1
        order = LibDDP.sampler_indices(n, world, rank, epoch)  # 0-based
        sums = zeros(Float64, 2)  # loss x samples, samples
        for batch in Iterators.partition(order, BATCH)
            x = train_x[:, batch .+ 1]
            y = train_y[batch .+ 1]
            loss = LibDDP.training_step!(s, m, opt, x, y)
            steps += 1
            step_log === nothing || println(step_log, loss)  # shortest round-trip Float32
            sums .+= (loss * length(batch), length(batch))
        end
        LibDDP.reduce!(s, sums, LibDDP.SUM)
        rank == 0 && @printf("epoch %2d  loss %.4f\n", epoch + 1, sums[1] / sums[2])
        LibDDP.save_checkpoint(s, joinpath(dir, "last.ckpt"), m, opt; step=steps, epoch=epoch + 1,
                               batches_in_epoch=batches)
    end
    step_log === nothing || close(step_log)
    LibDDP.train!(m, false)
    logits = LibDDP.forward(m, test_x)  # classes x samples
    correct = count(i -> argmax(logits[:, i]) - 1 == test_y[i], eachindex(test_y))
    LibDDP.teardown!(s)
    rank == 0 && @printf("held-out accuracy %.4f (%d of %d), %d processes, %.2f s from launch to result\n",
                         correct / length(test_y), correct, length(test_y), world, time() - started)
    close(s)
end

main(ARGS[1])
