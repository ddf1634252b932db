/*
 * C helpers of training_surface.i's methods, in the wrapper's header section
 * ahead of every %extend body (SWIG emits those where the class is
 * declared, before the files included at ddp.i's end).
 */
%{
typedef ddp_outputs DdpOutputs;
typedef ddp_metric DdpMetric;

/* torch.optim's param_groups as the binding collects them (ParamGroups.add)
 * before the C call: the patterns are the object's own copies. */
typedef struct DdpParamGroups {
  ddp_param_group *groups;
  char ***patterns;
  size_t count;
} DdpParamGroups;

static void ddp_swig_free_strings(char **s) {
  for (size_t i = 0; s && s[i]; ++i) free(s[i]);
  free(s);
}

/* A copy of a NULL-terminated list of strings (NULL for none). */
static char **ddp_swig_copy_strings(char **s, size_t *n) {
  size_t count = 0;
  while (s && s[count]) ++count;
  *n = count;
  if (!count) return NULL;
  char **copy = (char **)calloc(count + 1, sizeof(char *));
  for (size_t i = 0; copy && i < count; ++i) {
    copy[i] = strdup(s[i]);
    if (!copy[i]) {
      ddp_swig_free_strings(copy);
      return NULL;
    }
  }
  return copy;
}

/* A reduction's dims: NULL with 0 (every dimension) when none are given. */
static DdpTensor *ddp_swig_reduce(int mean, const DdpTensor *t, const int64_t *dims, size_t ndims, bool keepdim) {
  DdpTensor *out = NULL;
  if (mean)
    ddp_swig_check(ddp_tensor_mean(t, ndims ? dims : NULL, ndims, keepdim, &out));
  else
    ddp_swig_check(ddp_tensor_sum(t, ndims ? dims : NULL, ndims, keepdim, &out));
  return out;
}
%}
