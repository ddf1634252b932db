"""
    LibDDP

libddp from Julia: process groups, Lightning's collectives and the DDP
gradient reducer with PyTorch's comm hooks, through `ccall` on libddp's C
API. Handles are freed by finalizers (or `close`); a failing call throws
[`DDPError`](@ref) with libddp's status and message.

The library is `ENV["LIBDDP"]` if set, else `libddp` on the loader's path.

    using LibDDP
    g = LibDDP.Group()                       # torchrun/ddprun, SLURM, ... environment
    x = fill(Float32(LibDDP.rank(g)), 4)
    LibDDP.all_reduce!(g, x)                 # in place
"""
module LibDDP

const libddp = get(ENV, "LIBDDP", "libddp")

# Statuses and enums of capi/include/ddp/common.h and collectives.h.
const DDP_OK = Cint(0)
const DDP_E_INVALID_ARGUMENT = Cint(-1)
const SUM, MEAN, MIN, MAX, PRODUCT = Cuint(0), Cuint(1), Cuint(2), Cuint(3), Cuint(4)
const DTYPES = Dict{DataType,Cuint}(Float32 => 0, Float64 => 1, Float16 => 2, Int8 => 4, UInt8 => 5, Int32 => 6,
                                    Int64 => 7, Bool => 8)

"""A failed libddp call: `status` (a libddp status code) and `message`."""
struct DDPError <: Exception
    status::Cint
    message::String
end
Base.showerror(io::IO, e::DDPError) = print(io, "DDPError(", e.status, "): ", e.message)

"""Throws a DDPError with libddp's thread-local message unless `status` is DDP_OK."""
macro check(call)
    quote
        local status = $(esc(call))
        if status != DDP_OK
            local msg = unsafe_string(ccall((:ddp_last_error_message, libddp), Cstring, ()))
            throw(DDPError(status, msg))
        end
        nothing
    end
end

# ---- structs (layouts of the C header; checked by test/check_ccalls.py) ----

# C: ddp_device
struct Device
    type::Cuint
    index::Cint
end

# C: ddp_group_options
struct GroupOptions
    version::Cuint
    backend::Cstring
    timeout_ms::Int64
    device::Device
end

# C: ddp_reducer_options
mutable struct ReducerOptions
    version::Cuint
    bucket_cap_mb::Cdouble
    first_bucket_mb::Cdouble
    find_unused_parameters::Cint
    gradient_as_bucket_view::Cint
    broadcast_parameters::Cint
    autograd_hooks::Cint
    join_enabled::Cint
    static_graph::Cint
end

# C: ddp_powersgd_options
mutable struct PowerSGDOptions
    version::Cuint
    matrix_approximation_rank::Cint
    start_powersgd_iter::Int64
    min_compression_rate::Cdouble
    use_error_feedback::Cint
    warm_start::Cint
    orthogonalization_epsilon::Cdouble
    random_seed::UInt32
    batch_tensors_with_same_shape::Cint
    batched::Cint
end

# C: ddp_compression_stats
mutable struct CompressionStats
    numel_before::UInt64
    numel_after::UInt64
    iteration::Int64
end

version() = unsafe_string(ccall((:ddp_version_string, libddp), Cstring, ()))

# ---- tensors: views of Julia arrays (the wrapper keeps the array alive) ----

mutable struct Tensor
    ptr::Ptr{Cvoid}
    owner::Any
end

function tensor_view(a::Array{T}) where {T}
    haskey(DTYPES, T) || throw(ArgumentError("unsupported element type $T"))
    shape = Int64[size(a)...]
    reverse!(shape)  # Julia is column-major: the C view is the transposed shape
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_tensor_from_blob, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Cuint, Ptr{Int64}, Csize_t),
                 out, a, DTYPES[T], shape, length(shape))
    t = Tensor(out[], a)
    finalizer(t -> ccall((:ddp_tensor_free, libddp), Cvoid, (Ptr{Cvoid},), t.ptr), t)
    return t
end

function tensor_to_vector(ptr::Ptr{Cvoid}, ::Type{T}) where {T}
    n = ccall((:ddp_tensor_numel, libddp), Int64, (Ptr{Cvoid},), ptr)
    v = Vector{T}(undef, n)
    @check ccall((:ddp_tensor_copy_to, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t), ptr, v, sizeof(v))
    return v
end

# ---- groups and collectives ----

mutable struct Group
    ptr::Ptr{Cvoid}
end

function own_group(ptr::Ptr{Cvoid})
    g = Group(ptr)
    finalizer(close, g)
    return g
end

"""The group the environment describes (torchrun/ddprun, SLURM, LSF, MPI, Lightning)."""
function Group()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_group_init, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ptr{GroupOptions}), out, C_NULL, C_NULL)
    return own_group(out[])
end

"""An explicit group: `rank` of `world_size`, rank 0's store at `master_addr:master_port`."""
function Group(rank::Integer, world_size::Integer, master_addr::AbstractString, master_port::Integer)
    env = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_env_new, libddp), Cint,
                 (Ptr{Ptr{Cvoid}}, Cint, Cint, Cint, Cint, Cint, Cstring, Cint),
                 env, rank, world_size, rank, world_size, 0, master_addr, master_port)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    status = ccall((:ddp_group_init, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ptr{GroupOptions}), out, env[], C_NULL)
    ccall((:ddp_env_free, libddp), Cvoid, (Ptr{Cvoid},), env[])
    @check status
    return own_group(out[])
end

function Base.close(g::Group)
    g.ptr == C_NULL || ccall((:ddp_group_free, libddp), Cvoid, (Ptr{Cvoid},), g.ptr)
    g.ptr = C_NULL
end

rank(g::Group) = Int(ccall((:ddp_group_rank, libddp), Cint, (Ptr{Cvoid},), g.ptr))
world_size(g::Group) = Int(ccall((:ddp_group_size, libddp), Cint, (Ptr{Cvoid},), g.ptr))
barrier(g::Group) = @check ccall((:ddp_barrier, libddp), Cint, (Ptr{Cvoid},), g.ptr)

"""Lightning's sync_ddp, in place (`op`: SUM, MEAN, MIN, MAX, PRODUCT)."""
function all_reduce!(g::Group, a::Array, op::Cuint=SUM)
    t = tensor_view(a)
    @check ccall((:ddp_all_reduce, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cuint), g.ptr, t.ptr, op)
    return a
end

"""`src`'s values into every rank's `a`."""
function broadcast!(g::Group, a::Array, src::Integer=0)
    t = tensor_view(a)
    @check ccall((:ddp_broadcast, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cint), g.ptr, t.ptr, src)
    return a
end

"""Lightning's gather_all_tensors for vectors: every rank's `v`, lengths may differ."""
function all_gather_uneven(g::Group, v::Vector{T}) where {T}
    t = tensor_view(copy(v))
    parts = fill(C_NULL, world_size(g))
    @check ccall((:ddp_all_gather_uneven, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), g.ptr, t.ptr,
                 parts)
    out = [tensor_to_vector(p, T) for p in parts]
    foreach(p -> ccall((:ddp_tensor_free, libddp), Cvoid, (Ptr{Cvoid},), p), parts)
    return out
end

"""Lightning's broadcast(obj), as bytes."""
function broadcast_bytes(g::Group, data::Vector{UInt8}, src::Integer=0)
    buf = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_broadcast_bytes, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Ptr{Cvoid}}),
                 g.ptr, data, length(data), src, buf)
    n = ccall((:ddp_buffer_size, libddp), Csize_t, (Ptr{Cvoid},), buf[])
    p = ccall((:ddp_buffer_data, libddp), Ptr{UInt8}, (Ptr{Cvoid},), buf[])
    out = copy(unsafe_wrap(Vector{UInt8}, p, n))
    ccall((:ddp_buffer_free, libddp), Cvoid, (Ptr{Cvoid},), buf[])
    return out
end

"""Lightning's reduce_boolean_decision: all ranks agree (`all`) or any does."""
function reduce_boolean_decision(g::Group, decision::Bool; all::Bool=true)
    out = Ref{Cint}(0)
    @check ccall((:ddp_reduce_boolean_decision, libddp), Cint, (Ptr{Cvoid}, Cint, Cint, Ptr{Cint}), g.ptr, decision,
                 all, out)
    return out[] != 0
end

# ---- comm hooks ----

mutable struct CommHook
    ptr::Ptr{Cvoid}
end

function own_hook(out::Ref{Ptr{Cvoid}})
    h = CommHook(out[])
    finalizer(close, h)
    return h
end

function Base.close(h::CommHook)
    h.ptr == C_NULL || ccall((:ddp_comm_hook_free, libddp), Cvoid, (Ptr{Cvoid},), h.ptr)
    h.ptr = C_NULL
end

function allreduce_hook()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_allreduce, libddp), Cint, (Ptr{Ptr{Cvoid}},), out)
    return own_hook(out)
end

function fp16_compress_hook()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_fp16_compress, libddp), Cint, (Ptr{Ptr{Cvoid}},), out)
    return own_hook(out)
end

"""PyTorch's PowerSGDState defaults; change fields, then `powersgd_hook(opts)`."""
function powersgd_options()
    o = PowerSGDOptions(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    @check ccall((:ddp_powersgd_options_init, libddp), Cint, (Ref{PowerSGDOptions}, Cuint), o, 1)
    return o
end

function powersgd_hook(o::PowerSGDOptions=powersgd_options())
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_powersgd, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ref{PowerSGDOptions}), out, o)
    return own_hook(out)
end

"""(elements before, elements after, steps) of a PowerSGD hook."""
function compression_stats(h::CommHook)
    s = CompressionStats(0, 0, 0)
    @check ccall((:ddp_comm_hook_compression_stats, libddp), Cint, (Ptr{Cvoid}, Ref{CompressionStats}), h.ptr, s)
    return (s.numel_before, s.numel_after, s.iteration)
end

# ---- the reducer over Julia-owned gradient arrays ----

mutable struct Reducer
    ptr::Ptr{Cvoid}
    grads::Vector{Vector{Float32}}
    views::Vector{Tensor}
    group::Group
end

"""A reducer over `grads` (reduced in place: after `finish!` each holds the average)."""
function Reducer(g::Group, grads::Vector{Vector{Float32}}; bucket_cap_mb::Real=25)
    views = [tensor_view(v) for v in grads]
    o = ReducerOptions(0, 0, 0, 0, 0, 0, 0, 0, 0)
    @check ccall((:ddp_reducer_options_init, libddp), Cint, (Ref{ReducerOptions}, Cuint), o, 2)
    o.bucket_cap_mb = bucket_cap_mb
    o.broadcast_parameters = 0
    handles = [t.ptr for t in views]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_reducer_new, libddp), Cint,
                 (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Ptr{Ptr{Cvoid}}, Csize_t, Ref{ReducerOptions}),
                 out, g.ptr, C_NULL, handles, length(handles), o)
    r = Reducer(out[], grads, views, g)
    finalizer(close, r)
    return r
end

function Base.close(r::Reducer)
    r.ptr == C_NULL || ccall((:ddp_reducer_free, libddp), Cvoid, (Ptr{Cvoid},), r.ptr)
    r.ptr = C_NULL
end

mark_ready!(r::Reducer, i::Integer) =  # i is 1-based, as Julia indexes
    @check ccall((:ddp_reducer_mark_ready, libddp), Cint, (Ptr{Cvoid}, Csize_t), r.ptr, i - 1)
finish!(r::Reducer) = @check ccall((:ddp_reducer_finish, libddp), Cint, (Ptr{Cvoid},), r.ptr)
set_comm_hook!(r::Reducer, h::CommHook) =
    @check ccall((:ddp_reducer_set_comm_hook, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), r.ptr, h.ptr)

"""PyTorch's no_sync: `false` lets gradients accumulate locally until it is `true` again."""
set_sync!(r::Reducer, enabled::Bool) =
    @check ccall((:ddp_reducer_set_sync, libddp), Cint, (Ptr{Cvoid}, Cint), r.ptr, enabled)

"""Subgroups of `group_size` consecutive ranks; returns the one this rank is in."""
function new_subgroups(g::Group, group_size::Integer)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_group_new_subgroups, libddp), Cint, (Ptr{Cvoid}, Cint, Ptr{Ptr{Cvoid}}), g.ptr, group_size, out)
    return own_group(out[])
end

function bf16_compress_hook()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_bf16_compress, libddp), Cint, (Ptr{Ptr{Cvoid}},), out)
    return own_hook(out)
end

"""PyTorch's post_localSGD_hook: global all-reduce for `start_iter` steps,
then within `subgroup` (`nothing`: one per node). Pair it with a ModelAverager."""
function post_localsgd_hook(subgroup::Union{Nothing,Group}, start_iter::Integer; post_local_gradient_allreduce::Bool=true)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_post_localsgd, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Int64, Cint), out,
                 subgroup === nothing ? C_NULL : subgroup.ptr, start_iter, post_local_gradient_allreduce)
    return own_hook(out)
end

"""PyTorch's PeriodicModelAverager: `step!` after each optimizer step averages
the parameters over the group every `period` steps from `warmup_steps` on."""
mutable struct ModelAverager
    ptr::Ptr{Cvoid}
    group::Group
end

function ModelAverager(g::Group, period::Integer; warmup_steps::Integer=0)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_model_averager_new, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Int64, Int64), out, g.ptr,
                 period, warmup_steps)
    a = ModelAverager(out[], g)
    finalizer(close, a)
    return a
end

function Base.close(a::ModelAverager)
    a.ptr == C_NULL || ccall((:ddp_model_averager_free, libddp), Cvoid, (Ptr{Cvoid},), a.ptr)
    a.ptr = C_NULL
end

function step!(a::ModelAverager, params::Vector{Vector{Float32}})
    views = [tensor_view(p) for p in params]
    ptrs = [v.ptr for v in views]
    GC.@preserve views @check ccall((:ddp_model_averager_step, libddp), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Csize_t),
                                    a.ptr, ptrs, length(ptrs))
    return params
end

"""An all-reduce started without waiting: `wait!` it (in the order started)."""
mutable struct Work
    ptr::Ptr{Cvoid}
    view::Tensor  # keeps the array alive until the work goes
end

function all_reduce_async(g::Group, a::Array, op::Cuint=SUM)
    t = tensor_view(a)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_all_reduce_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cuint, Ptr{Ptr{Cvoid}}), g.ptr, t.ptr,
                 op, out)
    w = Work(out[], t)
    finalizer(w -> ccall((:ddp_work_free, libddp), Cvoid, (Ptr{Cvoid},), w.ptr), w)
    return w
end

"""Waits for the work; `timeout_ms` < 0: the group's timeout (running out is DDP_E_TIMEOUT)."""
wait!(w::Work; timeout_ms::Integer=-1) = @check ccall((:ddp_work_wait, libddp), Cint, (Ptr{Cvoid}, Int64), w.ptr, timeout_ms)

"""This process's place in the job, as its launcher or cluster gives it."""
environment() = read_env(out -> @check ccall((:ddp_env_detect, libddp), Cint, (Ptr{Ptr{Cvoid}},), out))

"""The facts of the environment `f(out)` makes, as a NamedTuple (the handle is freed)."""
function read_env(f)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    f(out)
    e = out[]
    try
        return (name=unsafe_string(ccall((:ddp_env_name, libddp), Cstring, (Ptr{Cvoid},), e)),
                rank=Int(ccall((:ddp_env_rank, libddp), Cint, (Ptr{Cvoid},), e)),
                world_size=Int(ccall((:ddp_env_world_size, libddp), Cint, (Ptr{Cvoid},), e)),
                local_rank=Int(ccall((:ddp_env_local_rank, libddp), Cint, (Ptr{Cvoid},), e)),
                local_world_size=Int(ccall((:ddp_env_local_world_size, libddp), Cint, (Ptr{Cvoid},), e)),
                node_rank=Int(ccall((:ddp_env_node_rank, libddp), Cint, (Ptr{Cvoid},), e)),
                master_addr=unsafe_string(ccall((:ddp_env_master_addr, libddp), Cstring, (Ptr{Cvoid},), e)),
                master_port=Int(ccall((:ddp_env_master_port, libddp), Cint, (Ptr{Cvoid},), e)))
    finally
        ccall((:ddp_env_free, libddp), Cvoid, (Ptr{Cvoid},), e)
    end
end

# ---- training: TorchScript modules, SGD, DistributedSampler, DDPStrategy ----

# C: ddp_sgd_options
mutable struct SGDOptions
    version::Cuint
    lr::Cdouble
    momentum::Cdouble
    dampening::Cdouble
    weight_decay::Cdouble
    nesterov::Cint
end

# C: ddp_sampler_options
mutable struct SamplerOptions
    version::Cuint
    shuffle::Cint
    seed::Int64
    drop_last::Cint
    unrepeated::Cint
    start::Int64
end

# C: ddp_cluster_callbacks
struct ClusterCallbacks
    user_data::Ptr{Cvoid}
    world_size::Ptr{Cvoid}
    global_rank::Ptr{Cvoid}
    local_rank::Ptr{Cvoid}
    local_world_size::Ptr{Cvoid}
    node_rank::Ptr{Cvoid}
    main_address::Ptr{Cvoid}
    main_port::Ptr{Cvoid}
end

# C: ddp_checkpoint_io
struct CheckpointIO
    user_data::Ptr{Cvoid}
    save::Ptr{Cvoid}
    load::Ptr{Cvoid}
    remove::Ptr{Cvoid}
end

# C: ddp_strategy_options
mutable struct StrategyOptions
    version::Cuint
    kind::Cuint
    accelerator::Cuint
    devices::Cint
    backend::Cstring
    timeout_ms::Int64
    bucket_cap_mb::Cdouble
    first_bucket_mb::Cdouble
    find_unused_parameters::Cint
    broadcast_buffers::Cint
    comm_hook::Ptr{Cvoid}
    model_averaging_period::Int64
    model_averaging_warmup::Int64
    sync_batchnorm::Cint
    static_graph::Cint
    gradient_as_bucket_view::Cint
    precision::Cstring
    gradient_clip_val::Cdouble
    gradient_clip_algorithm::Cuint
    cluster_environment::Ptr{Cvoid}
    cluster_callbacks::Ptr{ClusterCallbacks}
    checkpoint_io::Ptr{CheckpointIO}
    state_dict_prefix::Cstring
    requeue_signal::Cint
    join_enabled::Cint
    divide_by_initial_world_size::Cint
end

"""A TorchScript module saved by torch.jit.save."""
mutable struct Module
    ptr::Ptr{Cvoid}
end

function Module(path::AbstractString)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_module_load, libddp), Cint, (Ptr{Ptr{Cvoid}}, Cstring), out, path)
    m = Module(out[])
    finalizer(close, m)
    return m
end

function Base.close(m::Module)
    m.ptr == C_NULL || ccall((:ddp_module_free, libddp), Cvoid, (Ptr{Cvoid},), m.ptr)
    m.ptr = C_NULL
end

"""LibTorch's SGD over `m`'s parameters (torch.optim.SGD's arguments)."""
mutable struct Optimizer
    ptr::Ptr{Cvoid}
    module_::Module
end

function sgd(m::Module; lr::Real=0.001, momentum::Real=0, dampening::Real=0, weight_decay::Real=0,
             nesterov::Bool=false)
    o = SGDOptions(1, lr, momentum, dampening, weight_decay, nesterov)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_optimizer_new_sgd, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{SGDOptions}), out, m.ptr, o)
    opt = Optimizer(out[], m)
    finalizer(close, opt)
    return opt
end

function Base.close(opt::Optimizer)
    opt.ptr == C_NULL || ccall((:ddp_optimizer_free, libddp), Cvoid, (Ptr{Cvoid},), opt.ptr)
    opt.ptr = C_NULL
end

zero_grad!(opt::Optimizer) = @check ccall((:ddp_optimizer_zero_grad, libddp), Cint, (Ptr{Cvoid},), opt.ptr)

"""DistributedSampler's indices (0-based) for `rank` of `world` in `epoch`."""
function sampler_indices(n::Integer, world::Integer, rank::Integer, epoch::Integer; shuffle::Bool=true,
                         seed::Integer=0, drop_last::Bool=false, unrepeated::Bool=false)
    o = SamplerOptions(3, shuffle, seed, drop_last, unrepeated, 0)
    count = Ref{Csize_t}(0)
    @check ccall((:ddp_sampler_indices, libddp), Cint,
                 (Int64, Cint, Cint, Int64, Ref{SamplerOptions}, Ptr{Int64}, Csize_t, Ptr{Csize_t}),
                 n, world, rank, epoch, o, C_NULL, 0, count)
    out = Vector{Int64}(undef, count[])
    @check ccall((:ddp_sampler_indices, libddp), Cint,
                 (Int64, Cint, Cint, Int64, Ref{SamplerOptions}, Ptr{Int64}, Csize_t, Ptr{Csize_t}),
                 n, world, rank, epoch, o, out, length(out), count)
    return out
end

"""Lightning's DDPStrategy on the CPU: `devices` processes on this node
(the program starts the others itself unless a launcher did)."""
mutable struct Strategy
    ptr::Ptr{Cvoid}
    modules::Vector{Module}
end

"""`state_dict_prefix`: the LightningModule attribute holding the model,
with its dot ("net."), under which checkpoints name its entries."""
function Strategy(; devices::Integer=1, timeout_ms::Integer=0, find_unused_parameters::Bool=false,
                  state_dict_prefix::Union{Nothing,AbstractString}=nothing)
    o = StrategyOptions(0, 0, 0, 0, Cstring(C_NULL), 0, 0, 0, 0, 0, C_NULL, 0, 0, 0, 0, 0,
                        Cstring(C_NULL), 0, 0, C_NULL, C_NULL, C_NULL, Cstring(C_NULL), 0, 0, 1)
    @check ccall((:ddp_strategy_options_init, libddp), Cint, (Ref{StrategyOptions}, Cuint), o, 5)
    o.devices = devices
    o.timeout_ms = timeout_ms
    o.find_unused_parameters = find_unused_parameters
    prefix = state_dict_prefix === nothing ? nothing : String(state_dict_prefix)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve prefix begin  # ddp_strategy_new copies the string
        prefix === nothing || (o.state_dict_prefix = Base.unsafe_convert(Cstring, prefix))
        @check ccall((:ddp_strategy_new, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ref{StrategyOptions}), out, o)
    end
    s = Strategy(out[], Module[])
    finalizer(close, s)
    return s
end

function Base.close(s::Strategy)
    s.ptr == C_NULL || ccall((:ddp_strategy_free, libddp), Cvoid, (Ptr{Cvoid},), s.ptr)
    s.ptr = C_NULL
end

setup_environment!(s::Strategy) = @check ccall((:ddp_strategy_setup_environment, libddp), Cint, (Ptr{Cvoid},), s.ptr)
global_rank(s::Strategy) = Int(ccall((:ddp_strategy_global_rank, libddp), Cint, (Ptr{Cvoid},), s.ptr))
world_size(s::Strategy) = Int(ccall((:ddp_strategy_world_size, libddp), Cint, (Ptr{Cvoid},), s.ptr))
teardown!(s::Strategy) = @check ccall((:ddp_strategy_teardown, libddp), Cint, (Ptr{Cvoid},), s.ptr)

function setup_module!(s::Strategy, m::Module)
    @check ccall((:ddp_strategy_setup_module, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), s.ptr, m.ptr)
    push!(s.modules, m)
    return m
end

"""Lightning's reduce: `a` in place over the ranks (SUM, MEAN, ...)."""
function reduce!(s::Strategy, a::Array, op::Cuint=MEAN)
    t = tensor_view(a)
    @check ccall((:ddp_strategy_reduce, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cuint), s.ptr, t.ptr, op)
    return a
end

# C: ddp_checkpoint_info
mutable struct CheckpointInfo
    version::Cuint
    step::Int64
    epoch::Int64
    batches_in_epoch::Int64
    user::Ptr{Cvoid}
    user_len::Csize_t
    samples_in_epoch::Int64
    world_size::Int64
end

"""Lightning's checkpoint of `m` and `opt` with its counters (epochs
completed, optimizer steps, batches per epoch); global rank 0 writes it
atomically. Collective."""
function save_checkpoint(s::Strategy, path::AbstractString, m::Module, opt::Optimizer; step::Integer, epoch::Integer,
                         batches_in_epoch::Integer=0)
    info = CheckpointInfo(2, step, epoch, batches_in_epoch, C_NULL, 0, 0, 0)
    opts = [opt.ptr]
    @check ccall((:ddp_strategy_save_checkpoint_v2, libddp), Cint,
                 (Ptr{Cvoid}, Cstring, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Ptr{Cvoid}}, Csize_t, Ref{CheckpointInfo}),
                 s.ptr, path, m.ptr, opts, 1, C_NULL, 0, info)
end

"""DistributedSampler's num_samples: indices per rank."""
function sampler_num_samples(n::Integer, world::Integer; drop_last::Bool=false)
    out = Ref{Int64}(0)
    @check ccall((:ddp_sampler_num_samples, libddp), Cint, (Int64, Cint, Cint, Ptr{Int64}), n, world, drop_last, out)
    return out[]
end

"""Training mode on or off (dropout, batch norm statistics)."""
train!(m::Module, on::Bool) = @check ccall((:ddp_module_train, libddp), Cint, (Ptr{Cvoid}, Cint), m.ptr, on)

"""The module's forward of `x` (features x batch), outside the strategy
(evaluation): a classes x batch matrix."""
function forward(m::Module, x::Matrix{Float32})
    input, out = tensor_view(x), Ref{Ptr{Cvoid}}(C_NULL)
    try
        @check ccall((:ddp_module_forward, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), m.ptr, input.ptr, out)
        v = tensor_to_vector(out[], Float32)
        return reshape(v, :, size(x, 2))
    finally
        ccall((:ddp_tensor_free, libddp), Cvoid, (Ptr{Cvoid},), out[])
    end
end

"""One step: zero_grad, forward of `x` (features x batch, column-major: the
module sees batch x features), cross-entropy against the 0-based class
labels `y`, backward (gradients averaged over the ranks), optimizer step.
Returns this rank's loss."""
function training_step!(s::Strategy, m::Module, opt::Optimizer, x::Matrix{Float32}, y::Vector{Int64})
    zero_grad!(opt)
    input, target = tensor_view(x), tensor_view(y)
    out, loss = Ref{Ptr{Cvoid}}(C_NULL), Ref{Ptr{Cvoid}}(C_NULL)
    try
        @check ccall((:ddp_strategy_forward, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                     s.ptr, m.ptr, input.ptr, out)
        @check ccall((:ddp_loss_cross_entropy, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                     out[], target.ptr, loss)
        @check ccall((:ddp_strategy_backward, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), s.ptr, loss[])
        @check ccall((:ddp_strategy_optimizer_step, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), s.ptr, opt.ptr)
        return tensor_to_vector(loss[], Float32)[1]
    finally
        foreach(p -> ccall((:ddp_tensor_free, libddp), Cvoid, (Ptr{Cvoid},), p[]), (out, loss))
    end
end

include("surface.jl")

end # module
