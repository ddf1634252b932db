# The 2-rank all-reduce and a gradient-sync step from Julia (LibDDP.jl):
#   LIBDDP=build/capi/libddp.so build/tools/ddprun --standalone --nproc-per-node 2 \
#       julia --project=bindings/julia/LibDDP examples/julia/allreduce_and_grad_sync.jl
using LibDDP

g = LibDDP.Group()  # the environment ddprun/torchrun/SLURM gives
r = LibDDP.rank(g)
x = Float32[r, r + 1, r + 2]
LibDDP.all_reduce!(g, x)
println("[rank $r] all_reduce SUM: $x")

# Gradients owned by Julia: mark each ready (1-based, last layer first), then finish!.
grads = [zeros(Float32, 12), zeros(Float32, 4)]
reducer = LibDDP.Reducer(g, grads)
LibDDP.set_comm_hook!(reducer, LibDDP.fp16_compress_hook())
grads[2] .= r .+ (0:3)
LibDDP.mark_ready!(reducer, 2)
grads[1] .= 10r .+ (0:11)
LibDDP.mark_ready!(reducer, 1)
LibDDP.finish!(reducer)
println("[rank $r] averaged bias grad: $(grads[2])")
