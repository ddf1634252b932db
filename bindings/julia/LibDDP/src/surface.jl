# The training surface through ccall (included by LibDDP.jl): tensors with
# arithmetic and autograd, the grad mode and seeding, every loss, module
# methods and state, optimizers with parameter groups, schedulers, the
# logged metric, and the rest of the strategy's and the group's calls.
# Every ccall and `# C:` struct is checked against the header by
# test/check_ccalls.py; there is no Julia runtime on the build machines, so
# none of this has run (README: the Julia binding).

const BINARY_OPS = (add=Cuint(0), sub=Cuint(1), mul=Cuint(2), div=Cuint(3), pow=Cuint(4), maximum=Cuint(5),
                    minimum=Cuint(6))
const UNARY_OPS = (neg=Cuint(0), exp=Cuint(1), log=Cuint(2), sqrt=Cuint(3), abs=Cuint(4), square=Cuint(5),
                   relu=Cuint(6), sigmoid=Cuint(7), tanh=Cuint(8), log1p=Cuint(9), sin=Cuint(10), cos=Cuint(11))
const LOSSES = (mse=Cuint(0), cross_entropy=Cuint(1), bce_with_logits=Cuint(2), l1=Cuint(3), smooth_l1=Cuint(4),
                huber=Cuint(5), nll=Cuint(6), kl_div=Cuint(7))
const REDUCTIONS = (mean=Cuint(0), sum=Cuint(1), none=Cuint(2), batchmean=Cuint(3))
const METRIC_REDUCE = (mean=Cuint(0), sum=Cuint(1), max=Cuint(2), min=Cuint(3))
const INHERIT = -1.0

"""Takes ownership of a new tensor handle (freed by its finalizer)."""
function own_tensor(ptr::Ptr{Cvoid})
    t = Tensor(ptr, nothing)
    finalizer(t -> ccall((:ddp_tensor_free, libddp), Cvoid, (Ptr{Cvoid},), t.ptr), t)
    return t
end

"""Calls `f(out)` with a fresh out-pointer and owns the tensor it returns."""
function new_tensor(f)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    f(out)
    return own_tensor(out[])
end

"""A new CPU tensor holding a copy of `a` (its C shape is `a`'s reversed: Julia is column-major)."""
function tensor(a::Array{T}) where {T}
    haskey(DTYPES, T) || throw(ArgumentError("unsupported element type $T"))
    shape = reverse!(Int64[size(a)...])
    t = new_tensor(out -> @check ccall((:ddp_tensor_new, libddp), Cint,
                                       (Ptr{Ptr{Cvoid}}, Cuint, Ptr{Int64}, Csize_t, Device), out, DTYPES[T], shape,
                                       length(shape), Device(0, 0)))
    @check ccall((:ddp_tensor_copy_from, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t), t.ptr, a, sizeof(a))
    return t
end

"""The C shape (row-major) of `t`."""
function shape(t::Tensor)
    n = ccall((:ddp_tensor_ndim, libddp), Csize_t, (Ptr{Cvoid},), t.ptr)
    p = ccall((:ddp_tensor_shape, libddp), Ptr{Int64}, (Ptr{Cvoid},), t.ptr)
    return n == 0 ? Int64[] : copy(unsafe_wrap(Array, p, Int(n)))
end

"""A Julia array copy of `t` (dimensions reversed back: column-major)."""
function to_array(t::Tensor, ::Type{T}) where {T}
    v = tensor_to_vector(t.ptr, T)
    dims = reverse(shape(t))
    return isempty(dims) ? v : reshape(v, dims...)
end

dtype_name(dtype::Cuint) = unsafe_string(ccall((:ddp_dtype_name, libddp), Cstring, (Cuint,), dtype))
dtype_size(dtype::Cuint) = Int(ccall((:ddp_dtype_size, libddp), Csize_t, (Cuint,), dtype))
nbytes(t::Tensor) = Int(ccall((:ddp_tensor_nbytes, libddp), Csize_t, (Ptr{Cvoid},), t.ptr))
status_string(status::Integer) = unsafe_string(ccall((:ddp_status_string, libddp), Cstring, (Cint,), status))
version_number() = Int(ccall((:ddp_version_number, libddp), Cuint, ()))

binary(op::Cuint, a::Tensor, b::Tensor) =
    new_tensor(out -> @check ccall((:ddp_tensor_binary, libddp), Cint, (Cuint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                                   op, a.ptr, b.ptr, out))
binary(op::Cuint, a::Tensor, s::Real) =
    new_tensor(out -> @check ccall((:ddp_tensor_binary_scalar, libddp), Cint,
                                   (Cuint, Ptr{Cvoid}, Cdouble, Ptr{Ptr{Cvoid}}), op, a.ptr, s, out))
unary(op::Cuint, a::Tensor) =
    new_tensor(out -> @check ccall((:ddp_tensor_unary, libddp), Cint, (Cuint, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), op, a.ptr,
                                   out))
Base.:+(a::Tensor, b::Union{Tensor,Real}) = binary(BINARY_OPS.add, a, b)
Base.:-(a::Tensor, b::Union{Tensor,Real}) = binary(BINARY_OPS.sub, a, b)
Base.:*(a::Tensor, b::Union{Tensor,Real}) = binary(BINARY_OPS.mul, a, b)
Base.:/(a::Tensor, b::Union{Tensor,Real}) = binary(BINARY_OPS.div, a, b)
Base.:^(a::Tensor, b::Real) = binary(BINARY_OPS.pow, a, b)
Base.:-(a::Tensor) = unary(UNARY_OPS.neg, a)
Base.exp(a::Tensor) = unary(UNARY_OPS.exp, a)
Base.log(a::Tensor) = unary(UNARY_OPS.log, a)
Base.sqrt(a::Tensor) = unary(UNARY_OPS.sqrt, a)
Base.abs(a::Tensor) = unary(UNARY_OPS.abs, a)
Base.tanh(a::Tensor) = unary(UNARY_OPS.tanh, a)
relu(a::Tensor) = unary(UNARY_OPS.relu, a)
sigmoid(a::Tensor) = unary(UNARY_OPS.sigmoid, a)

"""The sum over the C dimensions `dims` (0-based, empty: all)."""
Base.sum(a::Tensor; dims::Vector{Int64}=Int64[], keepdim::Bool=false) =
    new_tensor(out -> @check ccall((:ddp_tensor_sum, libddp), Cint,
                                   (Ptr{Cvoid}, Ptr{Int64}, Csize_t, Cint, Ptr{Ptr{Cvoid}}), a.ptr,
                                   isempty(dims) ? C_NULL : dims, length(dims), keepdim, out))
mean(a::Tensor; dims::Vector{Int64}=Int64[], keepdim::Bool=false) =
    new_tensor(out -> @check ccall((:ddp_tensor_mean, libddp), Cint,
                                   (Ptr{Cvoid}, Ptr{Int64}, Csize_t, Cint, Ptr{Ptr{Cvoid}}), a.ptr,
                                   isempty(dims) ? C_NULL : dims, length(dims), keepdim, out))
softmax(a::Tensor, dim::Integer; log::Bool=false) =
    new_tensor(out -> @check ccall((:ddp_tensor_softmax, libddp), Cint, (Ptr{Cvoid}, Int64, Cint, Ptr{Ptr{Cvoid}}),
                                   a.ptr, dim, log, out))
detached(a::Tensor) =
    new_tensor(out -> @check ccall((:ddp_tensor_clone, libddp), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), a.ptr, out))
function item(a::Tensor)
    v = Ref{Cdouble}(0)
    @check ccall((:ddp_tensor_item, libddp), Cint, (Ptr{Cvoid}, Ptr{Cdouble}), a.ptr, v)
    return v[]
end
"""Autograd's backward from a one-element tensor on this process only."""
backward!(a::Tensor) = @check ccall((:ddp_tensor_backward, libddp), Cint, (Ptr{Cvoid},), a.ptr)
"""The gradient of a leaf, or `nothing` before any."""
function grad(a::Tensor)
    t = new_tensor(out -> @check ccall((:ddp_tensor_grad, libddp), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), a.ptr, out))
    return t.ptr == C_NULL ? nothing : t
end
requires_grad(a::Tensor) = ccall((:ddp_tensor_requires_grad, libddp), Cint, (Ptr{Cvoid},), a.ptr) != 0
requires_grad!(a::Tensor, on::Bool=true) =
    @check ccall((:ddp_tensor_set_requires_grad, libddp), Cint, (Ptr{Cvoid}, Cint), a.ptr, on)

"""torch.set_grad_enabled for this thread; returns the previous mode."""
function set_grad_enabled(on::Bool)
    previous = Ref{Cint}(1)
    @check ccall((:ddp_grad_set_enabled, libddp), Cint, (Cint, Ptr{Cint}), on, previous)
    return previous[] != 0
end
is_grad_enabled() = ccall((:ddp_grad_is_enabled, libddp), Cint, ()) != 0
"""Lightning's seed_everything; returns the seed used."""
function seed_everything(seed::Integer; workers::Bool=false)
    used = Ref{Int64}(0)
    @check ccall((:ddp_seed_everything, libddp), Cint, (Int64, Cint, Ptr{Int64}), seed, workers, used)
    return used[]
end
function reset_seed()
    seeded = Ref{Cint}(0)
    @check ccall((:ddp_reset_seed, libddp), Cint, (Ptr{Cint},), seeded)
    return seeded[] != 0
end
set_deterministic(on::Bool; warn_only::Bool=false) =
    @check ccall((:ddp_set_deterministic, libddp), Cint, (Cint, Cint), on, warn_only)
is_deterministic() = ccall((:ddp_is_deterministic, libddp), Cint, ()) != 0

# C: ddp_loss_options
mutable struct LossOptions
    version::Cuint
    kind::Cuint
    reduction::Cuint
    weight::Ptr{Cvoid}
    ignore_index::Int64
    label_smoothing::Cdouble
    pos_weight::Ptr{Cvoid}
    beta::Cdouble
    delta::Cdouble
    log_target::Cint
end

"""
The torch.nn.functional loss `kind` (`LOSSES.huber`, ...) of `input` against `target`; a keyword left out keeps
torch's default (ddp_loss_options_init).
"""
function loss(kind::Cuint, input::Tensor, target::Tensor; reduction::Union{Nothing,Cuint}=nothing,
              weight::Union{Nothing,Tensor}=nothing, ignore_index::Union{Nothing,Integer}=nothing,
              label_smoothing::Union{Nothing,Real}=nothing, pos_weight::Union{Nothing,Tensor}=nothing,
              beta::Union{Nothing,Real}=nothing, delta::Union{Nothing,Real}=nothing,
              log_target::Union{Nothing,Bool}=nothing)
    o = LossOptions(0, kind, 0, C_NULL, 0, 0, C_NULL, 0, 0, 0)
    @check ccall((:ddp_loss_options_init, libddp), Cint, (Ref{LossOptions}, Cuint, Cuint), o, 1, kind)
    reduction === nothing || (o.reduction = reduction)
    weight === nothing || (o.weight = weight.ptr)
    ignore_index === nothing || (o.ignore_index = ignore_index)
    label_smoothing === nothing || (o.label_smoothing = label_smoothing)
    pos_weight === nothing || (o.pos_weight = pos_weight.ptr)
    beta === nothing || (o.beta = beta)
    delta === nothing || (o.delta = delta)
    log_target === nothing || (o.log_target = log_target)
    GC.@preserve weight pos_weight begin
        return new_tensor(out -> @check ccall((:ddp_loss_compute, libddp), Cint,
                                              (Ref{LossOptions}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), o, input.ptr,
                                              target.ptr, out))
    end
end
mse_loss(input::Tensor, target::Tensor) =
    new_tensor(out -> @check ccall((:ddp_loss_mse, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), input.ptr,
                                   target.ptr, out))
scale_loss(l::Tensor, factor::Real) =
    new_tensor(out -> @check ccall((:ddp_loss_scale, libddp), Cint, (Ptr{Cvoid}, Cdouble, Ptr{Ptr{Cvoid}}), l.ptr,
                                   factor, out))

"""Lightning's self.log(..., on_epoch=True, reduce_fx=...): update per batch, compute per epoch."""
mutable struct Metric
    ptr::Ptr{Cvoid}
end
function Metric(reduce::Cuint=METRIC_REDUCE.mean)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_metric_new, libddp), Cint, (Ptr{Ptr{Cvoid}}, Cuint), out, reduce)
    m = Metric(out[])
    finalizer(m -> ccall((:ddp_metric_free, libddp), Cvoid, (Ptr{Cvoid},), m.ptr), m)
    return m
end
update!(m::Metric, value::Real, batch_size::Integer=1) =
    @check ccall((:ddp_metric_update, libddp), Cint, (Ptr{Cvoid}, Cdouble, Int64), m.ptr, value, batch_size)
reset!(m::Metric) = @check ccall((:ddp_metric_reset, libddp), Cint, (Ptr{Cvoid},), m.ptr)
"""The epoch's value: this rank's, or over every rank of a set-up strategy (sync_dist; collective)."""
function compute(m::Metric, s::Union{Nothing,Strategy}=nothing)
    v = Ref{Cdouble}(0)
    @check ccall((:ddp_metric_compute, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cdouble}), m.ptr,
                 s === nothing ? C_NULL : s.ptr, v)
    return v[]
end

# ---- module methods and state ----

"""What a module's method returned: a tensor, a tuple or list (a Vector), or a dict (a Dict)."""
function take_outputs(out::Ptr{Cvoid})
    try
        n = Int(ccall((:ddp_outputs_count, libddp), Csize_t, (Ptr{Cvoid},), out))
        tensors = [new_tensor(o -> @check ccall((:ddp_outputs_at, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Ptr{Cvoid}}),
                                                 out, i - 1, o)) for i in 1:n]
        keys = [ccall((:ddp_outputs_key, libddp), Ptr{Cchar}, (Ptr{Cvoid}, Csize_t), out, i - 1) for i in 1:n]
        if n > 0 && keys[1] != C_NULL
            return Dict(unsafe_string(k) => t for (k, t) in zip(keys, tensors))
        end
        return tensors
    finally
        ccall((:ddp_outputs_free, libddp), Cvoid, (Ptr{Cvoid},), out)
    end
end

"""The module's `method` (forward) on `inputs`, keyword inputs by name; without the strategy."""
function call(m::Module, inputs::Vector{Tensor}; method::Union{Nothing,String}=nothing, kwargs...)
    names = [String(k) for k in keys(kwargs)]
    values = Tensor[v for v in Base.values(kwargs)]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve inputs values begin
        @check ccall((:ddp_module_call_v2, libddp), Cint,
                     (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Cstring}, Ptr{Ptr{Cvoid}}, Csize_t,
                      Ptr{Ptr{Cvoid}}), m.ptr, method === nothing ? C_NULL : method, [t.ptr for t in inputs],
                     length(inputs), names, [t.ptr for t in values], length(values), out)
    end
    return take_outputs(out[])
end

"""A model of the caller's tensors by name, shared: the last `num_buffers` are buffers."""
function Module(named::Vector{Pair{String,Tensor}}; num_buffers::Integer=0)
    n = length(named)
    is_buffer = Cint[i > n - num_buffers for i in 1:n]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve named begin
        @check ccall((:ddp_module_from_tensors, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Ptr{Ptr{Cvoid}}, Ptr{Cint},
                     Csize_t), out, [first(p) for p in named], [last(p).ptr for p in named], is_buffer, n)
    end
    m = Module(out[])
    finalizer(close, m)
    return m
end

num_parameters(m::Module) = Int(ccall((:ddp_module_num_parameters, libddp), Csize_t, (Ptr{Cvoid},), m.ptr))
"""Parameters and buffers in order: (dotted name, is a parameter)."""
function state_names(m::Module)
    n = Int(ccall((:ddp_module_state_count, libddp), Csize_t, (Ptr{Cvoid},), m.ptr))
    map(1:n) do i
        name, is_param = Ref{Cstring}(C_NULL), Ref{Cint}(0)
        @check ccall((:ddp_module_state_name, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Cstring}, Ptr{Cint}), m.ptr, i - 1,
                     name, is_param)
        (unsafe_string(name[]), is_param[] != 0)
    end
end
Base.get(m::Module, name::AbstractString) =
    new_tensor(out -> @check ccall((:ddp_module_get, libddp), Cint, (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}), m.ptr, name,
                                   out))
function grad(m::Module, name::AbstractString)
    t = new_tensor(out -> @check ccall((:ddp_module_grad, libddp), Cint, (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}), m.ptr,
                                       name, out))
    return t.ptr == C_NULL ? nothing : t
end
set!(m::Module, name::AbstractString, value::Tensor) =
    @check ccall((:ddp_module_set, libddp), Cint, (Ptr{Cvoid}, Cstring, Ptr{Cvoid}), m.ptr, name, value.ptr)
save(m::Module, path::AbstractString) = @check ccall((:ddp_module_save, libddp), Cint, (Ptr{Cvoid}, Cstring), m.ptr, path)
save_state_dict(m::Module, path::AbstractString) =
    @check ccall((:ddp_module_save_state_dict, libddp), Cint, (Ptr{Cvoid}, Cstring), m.ptr, path)
"""load_state_dict; with strict=false returns what it skipped (missing and unexpected keys)."""
function load_state_dict!(m::Module, path::AbstractString; strict::Bool=true)
    if strict
        @check ccall((:ddp_module_load_state_dict, libddp), Cint, (Ptr{Cvoid}, Cstring, Cint), m.ptr, path, 1)
        return ""
    end
    skipped = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_module_load_state_dict_nonstrict, libddp), Cint, (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}), m.ptr,
                 path, skipped)
    return String(take_bytes(skipped[]))
end

"""The bytes of a ddp_buffer, which it frees."""
function take_bytes(buf::Ptr{Cvoid})
    buf == C_NULL && return UInt8[]
    n = ccall((:ddp_buffer_size, libddp), Csize_t, (Ptr{Cvoid},), buf)
    p = ccall((:ddp_buffer_data, libddp), Ptr{Cvoid}, (Ptr{Cvoid},), buf)
    bytes = copy(unsafe_wrap(Array, Ptr{UInt8}(p), Int(n)))
    ccall((:ddp_buffer_free, libddp), Cvoid, (Ptr{Cvoid},), buf)
    return bytes
end

# ---- optimizers, parameter groups, schedulers ----

# C: ddp_adam_options
mutable struct AdamOptions
    version::Cuint
    lr::Cdouble
    beta1::Cdouble
    beta2::Cdouble
    eps::Cdouble
    weight_decay::Cdouble
    amsgrad::Cint
end

# C: ddp_param_group
struct ParamGroupC
    version::Cuint
    patterns::Ptr{Cstring}
    num_patterns::Csize_t
    lr::Cdouble
    weight_decay::Cdouble
    momentum::Cdouble
end

"""One of torch.optim's param_groups by name patterns (none: the rest); INHERIT keeps the optimizer's value."""
struct ParamGroup
    patterns::Vector{String}
    lr::Float64
    weight_decay::Float64
    momentum::Float64
end
ParamGroup(patterns::Vector{String}=String[]; lr::Real=INHERIT, weight_decay::Real=INHERIT, momentum::Real=INHERIT) =
    ParamGroup(patterns, lr, weight_decay, momentum)

function own_optimizer(out::Ref{Ptr{Cvoid}}, m::Module)
    opt = Optimizer(out[], m)
    finalizer(close, opt)
    return opt
end

"""torch.optim.Adam (or AdamW with `decoupled`) over the module, optionally in parameter groups."""
function adam(m::Module; lr::Real=0.001, beta1::Real=0.9, beta2::Real=0.999, eps::Real=1e-8, weight_decay::Real=0,
              amsgrad::Bool=false, decoupled::Bool=false, groups::Vector{ParamGroup}=ParamGroup[])
    o = AdamOptions(1, lr, beta1, beta2, eps, weight_decay, amsgrad)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    if isempty(groups)
        if decoupled
            @check ccall((:ddp_optimizer_new_adamw, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{AdamOptions}), out,
                         m.ptr, o)
        else
            @check ccall((:ddp_optimizer_new_adam, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{AdamOptions}), out,
                         m.ptr, o)
        end
    else
        with_groups(groups) do raw
            if decoupled
                @check ccall((:ddp_optimizer_new_adamw_groups, libddp), Cint,
                             (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{AdamOptions}, Ptr{ParamGroupC}, Csize_t), out, m.ptr, o,
                             raw, length(raw))
            else
                @check ccall((:ddp_optimizer_new_adam_groups, libddp), Cint,
                             (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{AdamOptions}, Ptr{ParamGroupC}, Csize_t), out, m.ptr, o,
                             raw, length(raw))
            end
        end
    end
    return own_optimizer(out, m)
end

"""torch.optim.SGD over the module in parameter groups."""
function sgd_groups(m::Module, groups::Vector{ParamGroup}; lr::Real=0.001, momentum::Real=0, dampening::Real=0,
                    weight_decay::Real=0, nesterov::Bool=false)
    o = SGDOptions(1, lr, momentum, dampening, weight_decay, nesterov)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    with_groups(groups) do raw
        @check ccall((:ddp_optimizer_new_sgd_groups, libddp), Cint,
                     (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{SGDOptions}, Ptr{ParamGroupC}, Csize_t), out, m.ptr, o, raw,
                     length(raw))
    end
    return own_optimizer(out, m)
end

"""Runs `f` with the C form of `groups` (their pattern strings kept alive meanwhile)."""
function with_groups(f, groups::Vector{ParamGroup})
    cstrings = [Base.cconvert(Ptr{Cstring}, g.patterns) for g in groups]
    GC.@preserve cstrings begin
        raw = [ParamGroupC(1, isempty(g.patterns) ? C_NULL : Base.unsafe_convert(Ptr{Cstring}, c), length(g.patterns),
                           g.lr, g.weight_decay, g.momentum) for (g, c) in zip(groups, cstrings)]
        return f(raw)
    end
end

num_groups(opt::Optimizer) = Int(ccall((:ddp_optimizer_num_groups, libddp), Csize_t, (Ptr{Cvoid},), opt.ptr))
function group_lr(opt::Optimizer, group::Integer)  # 1-based
    lr = Ref{Cdouble}(0)
    @check ccall((:ddp_optimizer_group_lr, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Cdouble}), opt.ptr, group - 1, lr)
    return lr[]
end
set_group_lr!(opt::Optimizer, group::Integer, lr::Real) =
    @check ccall((:ddp_optimizer_set_group_lr, libddp), Cint, (Ptr{Cvoid}, Csize_t, Cdouble), opt.ptr, group - 1, lr)
function lr(opt::Optimizer)
    v = Ref{Cdouble}(0)
    @check ccall((:ddp_optimizer_lr, libddp), Cint, (Ptr{Cvoid}, Ptr{Cdouble}), opt.ptr, v)
    return v[]
end
set_lr!(opt::Optimizer, lr::Real) = @check ccall((:ddp_optimizer_set_lr, libddp), Cint, (Ptr{Cvoid}, Cdouble), opt.ptr, lr)

# C: ddp_lr_scheduler_options
mutable struct LrSchedulerOptions
    version::Cuint
    kind::Cuint
    step_size::Int64
    milestones::Ptr{Int64}
    num_milestones::Csize_t
    gamma::Cdouble
    t_max::Int64
    eta_min::Cdouble
    start_factor::Cdouble
    end_factor::Cdouble
    total_iters::Int64
    max_lr::Cdouble
    total_steps::Int64
    pct_start::Cdouble
    anneal_linear::Cint
    cycle_momentum::Cint
    base_momentum::Cdouble
    max_momentum::Cdouble
    div_factor::Cdouble
    final_div_factor::Cdouble
    three_phase::Cint
    mode_max::Cint
    factor::Cdouble
    patience::Int64
    threshold::Cdouble
    threshold_abs::Cint
    cooldown::Int64
    min_lr::Cdouble
    eps::Cdouble
end

const LR = (step=Cuint(0), multi_step=Cuint(1), exponential=Cuint(2), cosine_annealing=Cuint(3), linear=Cuint(4),
            one_cycle=Cuint(5), reduce_on_plateau=Cuint(6))

"""The options of scheduler `kind` with torch's defaults (ddp_lr_scheduler_options_init)."""
function LrSchedulerOptions(kind::Cuint)
    o = LrSchedulerOptions(0, kind, 0, C_NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    @check ccall((:ddp_lr_scheduler_options_init, libddp), Cint, (Ref{LrSchedulerOptions}, Cuint, Cuint), o, 1, kind)
    return o
end

mutable struct LrScheduler
    ptr::Ptr{Cvoid}
    keep::Any  # the optimizer, and a SequentialLR's schedulers
end
function own_scheduler(out::Ref{Ptr{Cvoid}}, keep)
    s = LrScheduler(out[], keep)
    finalizer(s -> ccall((:ddp_lr_scheduler_free, libddp), Cvoid, (Ptr{Cvoid},), s.ptr), s)
    return s
end
function LrScheduler(opt::Optimizer, o::LrSchedulerOptions)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_lr_scheduler_new, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ref{LrSchedulerOptions}), out,
                 opt.ptr, o)
    return own_scheduler(out, opt)
end
"""SequentialLR: `parts` one after another, the next taking over at each milestone (one fewer than parts)."""
function sequential(opt::Optimizer, parts::Vector{LrScheduler}, milestones::Vector{Int64})
    length(milestones) + 1 == length(parts) || throw(ArgumentError("one milestone fewer than schedulers"))
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_lr_scheduler_new_sequential, libddp), Cint,
                 (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Int64}), out, opt.ptr, [p.ptr for p in parts],
                 length(parts), milestones)
    return own_scheduler(out, (opt, parts))
end
step!(s::LrScheduler) = @check ccall((:ddp_lr_scheduler_step, libddp), Cint, (Ptr{Cvoid},), s.ptr)
step!(s::LrScheduler, metric::Real) =
    @check ccall((:ddp_lr_scheduler_step_metric, libddp), Cint, (Ptr{Cvoid}, Cdouble), s.ptr, metric)
function last_lr(s::LrScheduler)
    v = Ref{Cdouble}(0)
    @check ccall((:ddp_lr_scheduler_last_lr, libddp), Cint, (Ptr{Cvoid}, Ptr{Cdouble}), s.ptr, v)
    return v[]
end

# ---- the strategy's other calls ----

barrier(s::Strategy, name::AbstractString="") = @check ccall((:ddp_strategy_barrier, libddp), Cint, (Ptr{Cvoid}, Cstring),
                                                               s.ptr, name)
is_global_zero(s::Strategy) = ccall((:ddp_strategy_is_global_zero, libddp), Cint, (Ptr{Cvoid},), s.ptr) != 0
local_rank(s::Strategy) = Int(ccall((:ddp_strategy_local_rank, libddp), Cint, (Ptr{Cvoid},), s.ptr))
node_rank(s::Strategy) = Int(ccall((:ddp_strategy_node_rank, libddp), Cint, (Ptr{Cvoid},), s.ptr))
devices(s::Strategy) = Int(ccall((:ddp_strategy_devices, libddp), Cint, (Ptr{Cvoid},), s.ptr))
precision(s::Strategy) = unsafe_string(ccall((:ddp_strategy_precision, libddp), Cstring, (Ptr{Cvoid},), s.ptr))
precision_warning(s::Strategy) =
    unsafe_string(ccall((:ddp_strategy_precision_warning, libddp), Cstring, (Ptr{Cvoid},), s.ptr))
root_device(s::Strategy) = ccall((:ddp_strategy_root_device, libddp), Device, (Ptr{Cvoid},), s.ptr)
sync_batchnorm_layers(s::Strategy) = Int(ccall((:ddp_strategy_sync_batchnorm_layers, libddp), Cint, (Ptr{Cvoid},), s.ptr))
block_backward_sync!(s::Strategy, on::Bool) =
    @check ccall((:ddp_strategy_block_backward_sync, libddp), Cint, (Ptr{Cvoid}, Cint), s.ptr, on)
join!(s::Strategy) = @check ccall((:ddp_strategy_join, libddp), Cint, (Ptr{Cvoid},), s.ptr)
function requeue_requested(s::Strategy)
    out = Ref{Cint}(0)
    @check ccall((:ddp_strategy_requeue_requested, libddp), Cint, (Ptr{Cvoid}, Ptr{Cint}), s.ptr, out)
    return out[] != 0
end
requeue!(s::Strategy) = @check ccall((:ddp_strategy_requeue, libddp), Cint, (Ptr{Cvoid},), s.ptr)
remove_checkpoint(s::Strategy, path::AbstractString) =
    @check ccall((:ddp_strategy_remove_checkpoint, libddp), Cint, (Ptr{Cvoid}, Cstring), s.ptr, path)
save_module(s::Strategy, path::AbstractString, m::Module) =
    @check ccall((:ddp_strategy_save_module, libddp), Cint, (Ptr{Cvoid}, Cstring, Ptr{Cvoid}), s.ptr, path, m.ptr)

forward(s::Strategy, m::Module, x::Tensor) =
    new_tensor(out -> @check ccall((:ddp_strategy_forward, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid},
                                   Ptr{Ptr{Cvoid}}), s.ptr, m.ptr, x.ptr, out))
"""Strategy forward for any method, several and keyword inputs (see `call`)."""
function call(s::Strategy, m::Module, inputs::Vector{Tensor}; method::Union{Nothing,String}=nothing, kwargs...)
    names = [String(k) for k in keys(kwargs)]
    values = Tensor[v for v in Base.values(kwargs)]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve inputs values begin
        @check ccall((:ddp_strategy_call_v2, libddp), Cint,
                     (Ptr{Cvoid}, Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Cstring}, Ptr{Ptr{Cvoid}}, Csize_t,
                      Ptr{Ptr{Cvoid}}), s.ptr, m.ptr, method === nothing ? C_NULL : method, [t.ptr for t in inputs],
                     length(inputs), names, [t.ptr for t in values], length(values), out)
    end
    return take_outputs(out[])
end
"""loss.backward() with the gradients averaged over the ranks; collective."""
backward!(s::Strategy, l::Tensor) = @check ccall((:ddp_strategy_backward, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), s.ptr,
                                                 l.ptr)
"""The precision's step, then the averager's; false when the gradient scaler skipped it."""
function optimizer_step!(s::Strategy, opt::Optimizer)
    stepped = Ref{Cint}(0)
    @check ccall((:ddp_strategy_optimizer_step_v2, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cint}), s.ptr, opt.ptr,
                 stepped)
    return stepped[] != 0
end
forward_begin!(s::Strategy, m::Module) =
    @check ccall((:ddp_strategy_forward_begin, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), s.ptr, m.ptr)
forward_end!(s::Strategy) = @check ccall((:ddp_strategy_forward_end, libddp), Cint, (Ptr{Cvoid},), s.ptr)
"""Lightning's reduce of a tensor over `group` (nothing: the strategy's own, or one of its subgroups)."""
reduce!(s::Strategy, t::Tensor, op::Cuint=MEAN; group::Union{Nothing,Group}=nothing) =
    @check ccall((:ddp_strategy_reduce_v2, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cuint, Ptr{Cvoid}), s.ptr, t.ptr, op,
                 group === nothing ? C_NULL : group.ptr)
"""Lightning's all_gather(tensor, sync_grads): world x shape (C order)."""
all_gather(s::Strategy, t::Tensor; sync_grads::Bool=false, group::Union{Nothing,Group}=nothing) =
    new_tensor(out -> @check ccall((:ddp_strategy_all_gather_v3, libddp), Cint,
                                   (Ptr{Cvoid}, Ptr{Cvoid}, Cint, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), s.ptr, t.ptr, sync_grads,
                                   group === nothing ? C_NULL : group.ptr, out))
function all_gather_uneven(s::Strategy, t::Tensor)
    parts = fill(C_NULL, world_size(s))
    @check ccall((:ddp_strategy_all_gather_uneven, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), s.ptr, t.ptr,
                 parts)
    return [own_tensor(p) for p in parts]
end
function broadcast_bytes(s::Strategy, data::Vector{UInt8}, src::Integer=0)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_strategy_broadcast_bytes, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Ptr{Cvoid}}),
                 s.ptr, data, length(data), src, out)
    return take_bytes(out[])
end
function reduce_boolean_decision(s::Strategy, decision::Bool; all::Bool=true)
    out = Ref{Cint}(0)
    @check ccall((:ddp_strategy_reduce_boolean_decision, libddp), Cint, (Ptr{Cvoid}, Cint, Cint, Ptr{Cint}), s.ptr,
                 decision, all, out)
    return out[] != 0
end
"""SyncBatchNorm's forward over the group (training), else batch_norm with the running statistics."""
function batch_norm(s::Strategy, input::Tensor; weight::Union{Nothing,Tensor}=nothing,
                    bias::Union{Nothing,Tensor}=nothing, running_mean::Union{Nothing,Tensor}=nothing,
                    running_var::Union{Nothing,Tensor}=nothing, training::Bool=true, momentum::Real=0.1,
                    eps::Real=1e-5)
    p(t) = t === nothing ? C_NULL : t.ptr
    new_tensor(out -> @check ccall((:ddp_strategy_batch_norm, libddp), Cint,
                                   (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Cint, Cdouble,
                                    Cdouble, Ptr{Ptr{Cvoid}}), s.ptr, input.ptr, p(weight), p(bias), p(running_mean),
                                   p(running_var), training, momentum, eps, out))
end
"""The strategy's group (owned by the strategy: valid until teardown)."""
function group(s::Strategy)
    g = ccall((:ddp_strategy_group, libddp), Ptr{Cvoid}, (Ptr{Cvoid},), s.ptr)
    g == C_NULL && throw(DDPError(Cint(-2), "the strategy is not set up"))
    return Group(g)  # no finalizer: the strategy frees it
end

"""Several modules in one checkpoint, module i's entries under prefixes[i]; collective."""
function save_checkpoint(s::Strategy, path::AbstractString, modules::Vector{Pair{String,Module}};
                         optimizers::Vector{Optimizer}=Optimizer[], schedulers::Vector{LrScheduler}=LrScheduler[],
                         info::CheckpointInfo=CheckpointInfo(2, 0, 0, 0, C_NULL, 0, 0, 0))
    @check ccall((:ddp_strategy_save_checkpoint_v3, libddp), Cint,
                 (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Csize_t, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Ptr{Cvoid}},
                  Csize_t, Ref{CheckpointInfo}), s.ptr, path, [last(p).ptr for p in modules], [first(p) for p in modules],
                 length(modules), [o.ptr for o in optimizers], length(optimizers), [x.ptr for x in schedulers],
                 length(schedulers), info)
end
"""Every rank loads what `save_checkpoint(s, path, modules)` wrote; returns the counters."""
function load_checkpoint!(s::Strategy, path::AbstractString, modules::Vector{Pair{String,Module}};
                          optimizers::Vector{Optimizer}=Optimizer[], schedulers::Vector{LrScheduler}=LrScheduler[])
    info = CheckpointInfo(2, 0, 0, 0, C_NULL, 0, 0, 0)
    @check ccall((:ddp_strategy_load_checkpoint_v3, libddp), Cint,
                 (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Csize_t, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Ptr{Cvoid}},
                  Csize_t, Ref{CheckpointInfo}, Ptr{Ptr{Cvoid}}), s.ptr, path, [last(p).ptr for p in modules],
                 [first(p) for p in modules], length(modules), [o.ptr for o in optimizers], length(optimizers),
                 [x.ptr for x in schedulers], length(schedulers), info, C_NULL)
    return info
end
"""ModelCheckpoint(dirpath=dir, save_top_k=keep_last): dir/epoch=E-step=S.ckpt; collective."""
function save_checkpoint_to_dir(s::Strategy, dir::AbstractString, keep_last::Integer, m::Module, opt::Optimizer;
                                info::CheckpointInfo=CheckpointInfo(2, 0, 0, 0, C_NULL, 0, 0, 0))
    @check ccall((:ddp_strategy_save_checkpoint_to_dir, libddp), Cint,
                 (Ptr{Cvoid}, Cstring, Cint, Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Csize_t, Ptr{Ptr{Cvoid}}, Csize_t,
                  Ptr{Ptr{Cvoid}}, Csize_t, Ref{CheckpointInfo}), s.ptr, dir, keep_last, [m.ptr], C_NULL, 1, [opt.ptr], 1,
                 C_NULL, 0, info)
end
"""Trainer.fit(ckpt_path="last"): the newest loadable checkpoint in dir, or nothing on a first start; collective."""
function resume_from_dir!(s::Strategy, dir::AbstractString, m::Module, opt::Optimizer)
    info = CheckpointInfo(2, 0, 0, 0, C_NULL, 0, 0, 0)
    resumed, report = Ref{Cint}(0), Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_strategy_resume_from_dir, libddp), Cint,
                 (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Csize_t, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{Ptr{Cvoid}},
                  Csize_t, Ptr{Cint}, Ref{CheckpointInfo}, Ptr{Ptr{Cvoid}}, Ptr{Ptr{Cvoid}}), s.ptr, dir, [m.ptr], C_NULL,
                 1, [opt.ptr], 1, C_NULL, 0, resumed, info, C_NULL, report)
    text = String(take_bytes(report[]))
    return resumed[] == 0 ? nothing : (info, text)
end

# ---- the group's other calls ----

backend(g::Group) = unsafe_string(ccall((:ddp_group_backend, libddp), Cstring, (Ptr{Cvoid},), g.ptr))
timeout_ms(g::Group) = ccall((:ddp_group_timeout_ms, libddp), Int64, (Ptr{Cvoid},), g.ptr)
set_timeout!(g::Group, ms::Integer) = @check ccall((:ddp_group_set_timeout, libddp), Cint, (Ptr{Cvoid}, Int64), g.ptr, ms)
is_broken(g::Group) = ccall((:ddp_group_is_broken, libddp), Cint, (Ptr{Cvoid},), g.ptr) != 0
debug_detail(g::Group) = ccall((:ddp_group_debug_detail, libddp), Cint, (Ptr{Cvoid},), g.ptr) != 0
set_debug_detail!(g::Group, on::Bool) =
    @check ccall((:ddp_group_set_debug_detail, libddp), Cint, (Ptr{Cvoid}, Cint), g.ptr, on)
"""Every rank's array stacked (a new tensor, world x the C shape)."""
function all_gather(g::Group, a::Array)
    t = tensor_view(a)
    new_tensor(out -> @check ccall((:ddp_all_gather, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), g.ptr,
                                   t.ptr, out))
end
"""PyTorch's all_gather_into_tensor: every rank's array into `out` (world x length(a) elements), nothing allocated."""
function all_gather_into!(g::Group, a::Array, out::Array)
    t, o = tensor_view(a), tensor_view(out)
    @check ccall((:ddp_all_gather_into_tensor, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}), g.ptr, t.ptr, o.ptr)
    return out
end
function reduce!(g::Group, a::Array, dst::Integer, op::Cuint=SUM)
    t = tensor_view(a)
    @check ccall((:ddp_reduce, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cint, Cuint), g.ptr, t.ptr, dst, op)
    return a
end

"""Starts a collective with `f(out)` and keeps `view` (the array's tensor) with the work."""
function started(f, view::Tensor)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    f(out)
    w = Work(out[], view)
    finalizer(w -> ccall((:ddp_work_free, libddp), Cvoid, (Ptr{Cvoid},), w.ptr), w)
    return w
end
const NO_VIEW = Tensor(C_NULL, nothing)
broadcast_async(g::Group, a::Array, src::Integer=0) = let t = tensor_view(a)
    started(out -> @check(ccall((:ddp_broadcast_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cint, Ptr{Ptr{Cvoid}}),
                                g.ptr, t.ptr, src, out)), t)
end
reduce_async(g::Group, a::Array, dst::Integer, op::Cuint=SUM) = let t = tensor_view(a)
    started(out -> @check(ccall((:ddp_reduce_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Cint, Cuint,
                                Ptr{Ptr{Cvoid}}), g.ptr, t.ptr, dst, op, out)), t)
end
all_gather_async(g::Group, a::Array) = let t = tensor_view(a)
    started(out -> @check(ccall((:ddp_all_gather_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), g.ptr,
                                t.ptr, out)), t)
end
# The work keeps both arrays: the views' own finalizers free their handles once it goes.
all_gather_into_async(g::Group, a::Array, out::Array) = let t = tensor_view(a), o = tensor_view(out)
    started(w -> @check(ccall((:ddp_all_gather_into_tensor_async, libddp), Cint,
                              (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), g.ptr, t.ptr, o.ptr, w)),
            Tensor(o.ptr, (o, t)))
end
all_gather_uneven_async(g::Group, a::Array) = let t = tensor_view(a)
    started(out -> @check(ccall((:ddp_all_gather_uneven_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                                g.ptr, t.ptr, out)), t)
end
barrier_async(g::Group) =
    started(out -> @check(ccall((:ddp_barrier_async, libddp), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), g.ptr, out)), NO_VIEW)
broadcast_bytes_async(g::Group, data::Vector{UInt8}, src::Integer=0) =  # the bytes are copied
    started(out -> @check(ccall((:ddp_broadcast_bytes_async, libddp), Cint,
                                (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Ptr{Cvoid}}), g.ptr, data, length(data), src,
                                out)), NO_VIEW)
reduce_boolean_decision_async(g::Group, decision::Bool; all::Bool=true) =
    started(out -> @check(ccall((:ddp_reduce_boolean_decision_async, libddp), Cint,
                                (Ptr{Cvoid}, Cint, Cint, Ptr{Ptr{Cvoid}}), g.ptr, decision, all, out)), NO_VIEW)
function is_completed(w::Work)
    out = Ref{Cint}(0)
    @check ccall((:ddp_work_is_completed, libddp), Cint, (Ptr{Cvoid}, Ptr{Cint}), w.ptr, out)
    return out[] != 0
end
result_count(w::Work) = Int(ccall((:ddp_work_result_count, libddp), Csize_t, (Ptr{Cvoid},), w.ptr))
result_tensor(w::Work, i::Integer) =  # 1-based
    new_tensor(out -> @check ccall((:ddp_work_result_tensor, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Ptr{Cvoid}}),
                                   w.ptr, i - 1, out))
function result_bytes(w::Work)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_work_result_buffer, libddp), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), w.ptr, out)
    return take_bytes(out[])
end
function result_decision(w::Work)
    out = Ref{Cint}(0)
    @check ccall((:ddp_work_result_decision, libddp), Cint, (Ptr{Cvoid}, Ptr{Cint}), w.ptr, out)
    return out[] != 0
end

# ---- environments, hooks ----

"""The named environment's facts ("torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow")."""
env_from_name(name::AbstractString) =
    read_env(out -> @check ccall((:ddp_env_from_name, libddp), Cint, (Ptr{Ptr{Cvoid}}, Cstring), out, name))
"""The facts of the environment of "NAME=value" strings instead of the process's."""
function env_from_vars(vars::Vector{String}; name::Union{Nothing,String}=nothing)
    GC.@preserve vars begin
        ptrs = [[Base.unsafe_convert(Cstring, v) for v in vars]; Cstring(C_NULL)]
        read_env(out -> @check ccall((:ddp_env_from_vars, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cstring}, Cstring), out,
                                     ptrs, name === nothing ? C_NULL : name))
    end
end

noop_hook() = own_hook(let out = Ref{Ptr{Cvoid}}(C_NULL)
    @check ccall((:ddp_comm_hook_noop, libddp), Cint, (Ptr{Ptr{Cvoid}},), out)
    out
end)
"""`inner`'s reduction on an fp16 (or bf16) copy of each bucket."""
function wrap_hook(inner::CommHook; bf16::Bool=false)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    if bf16
        @check ccall((:ddp_comm_hook_wrap_bf16, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}), out, inner.ptr)
    else
        @check ccall((:ddp_comm_hook_wrap_fp16, libddp), Cint, (Ptr{Ptr{Cvoid}}, Ptr{Cvoid}), out, inner.ptr)
    end
    return own_hook(out)
end
join!(r::Reducer) = @check ccall((:ddp_reducer_join, libddp), Cint, (Ptr{Cvoid},), r.ptr)
bucket_count(r::Reducer) = Int(ccall((:ddp_reducer_bucket_count, libddp), Csize_t, (Ptr{Cvoid},), r.ptr))
"""A bucket's gradient indices (1-based), in bucket order."""
function bucket_indices(r::Reducer, bucket::Integer)
    count = Ref{Csize_t}(0)
    @check ccall((:ddp_reducer_bucket_indices, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Csize_t}, Csize_t, Ptr{Csize_t}),
                 r.ptr, bucket - 1, C_NULL, 0, count)
    idx = Vector{Csize_t}(undef, count[])
    @check ccall((:ddp_reducer_bucket_indices, libddp), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Csize_t}, Csize_t, Ptr{Csize_t}),
                 r.ptr, bucket - 1, idx, length(idx), count)
    return Int.(idx) .+ 1
end
