# One rank of the 2-rank test (started by ddprun): prints "rank R ok".
using LibDDP

g = LibDDP.Group()
r, w = LibDDP.rank(g), LibDDP.world_size(g)
@assert w == 2
x = Float32[r, r + 1, r + 2]
LibDDP.all_reduce!(g, x)
@assert x == Float32[1, 3, 5]
@assert LibDDP.all_gather_uneven(g, fill(Int64(r), r + 1)) == [Int64[0], Int64[1, 1]]
both = LibDDP.all_gather_into!(g, fill(Int32(r + 5), 2), zeros(Int32, 4))
@assert both == Int32[5, 5, 6, 6]
again = zeros(Int32, 4)
LibDDP.wait!(LibDDP.all_gather_into_async(g, fill(Int32(r + 5), 2), again))
@assert again == both
@assert LibDDP.broadcast_bytes(g, r == 0 ? Vector{UInt8}("from rank 0") : UInt8[]) == Vector{UInt8}("from rank 0")
@assert LibDDP.reduce_boolean_decision(g, r == 0; all=false)

# A reducer step over Julia-owned gradients with the fp16 hook: the average.
grads = [Float32[2r + 1, 2r + 2, 2r + 3], Float32[2r]]
red = LibDDP.Reducer(g, grads)
LibDDP.set_comm_hook!(red, LibDDP.fp16_compress_hook())
LibDDP.mark_ready!(red, 2)
LibDDP.mark_ready!(red, 1)
LibDDP.finish!(red)
@assert grads == [Float32[2, 3, 4], Float32[1]]

err = try
    LibDDP.broadcast!(g, zeros(Float32, 2), w)
    nothing
catch e
    e
end
@assert err isa LibDDP.DDPError && err.status == LibDDP.DDP_E_INVALID_ARGUMENT
close(red)
close(g)
println("rank $r ok")
