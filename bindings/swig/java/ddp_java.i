/* Java side of ddp.i (package org.libddp): DdpException, direct
 * ByteBuffers without copies, arrays, AutoCloseable handles. */

%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();  // libddp_java.so, the JNI glue linked to libddp.so: from java.library.path or the jar
  }
%}
%include <various.i>

/* Java's naming: methods and properties in lowerCamelCase (g.allReduce,
 * reducer.markReady, options.setBucketCapMb); classes and enums keep the
 * names ddp.i gives them. */
%rename("%(lowercamelcase)s", %$isfunction, %$not %$isconstructor, %$not %$isdestructor) "";
%rename("%(lowercamelcase)s", %$isvariable) "";

%{
static void ddp_java_throw(JNIEnv *jenv, ddp_status s) {
  if ((*jenv)->ExceptionCheck(jenv)) return; /* a Java callback's own exception goes up as it is */
  const char *msg = ddp_last_error_message();
  jclass cls = (*jenv)->FindClass(jenv, "org/libddp/DdpException");
  if (!cls) return;
  jmethodID ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(ILjava/lang/String;)V");
  jstring jmsg = (*jenv)->NewStringUTF(jenv, msg && *msg ? msg : ddp_status_string(s));
  jobject exc = (*jenv)->NewObject(jenv, cls, ctor, (jint)s, jmsg);
  if (exc) (*jenv)->Throw(jenv, (jthrowable)exc);
}

/* A new Java proxy (org.libddp.<name>) owning the C handle. */
static jobject ddp_java_proxy(JNIEnv *jenv, const char *cls_name, void *handle) {
  jclass cls = (*jenv)->FindClass(jenv, cls_name);
  jmethodID ctor = cls ? (*jenv)->GetMethodID(jenv, cls, "<init>", "(JZ)V") : NULL;
  return ctor ? (*jenv)->NewObject(jenv, cls, ctor, (jlong)(intptr_t)handle, JNI_TRUE) : NULL;
}
%}

%exception {
  ddp_swig_status = DDP_OK;
  $action
  if (ddp_swig_status != DDP_OK) {
    ddp_java_throw(jenv, ddp_swig_status);
    return $null;
  }
}

/* Shapes: long[]. */
%typemap(jni) (const int64_t *SHAPE, size_t NDIM) "jlongArray"
%typemap(jtype) (const int64_t *SHAPE, size_t NDIM) "long[]"
%typemap(jstype) (const int64_t *SHAPE, size_t NDIM) "long[]"
%typemap(javain) (const int64_t *SHAPE, size_t NDIM) "$javainput"
%typemap(in) (const int64_t *SHAPE, size_t NDIM) {
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = (int64_t *)calloc($2 ? $2 : 1, sizeof(int64_t));
  (*jenv)->GetLongArrayRegion(jenv, $input, 0, (jsize)$2, (jlong *)$1);
}
%typemap(freearg) (const int64_t *SHAPE, size_t NDIM) { free($1); }

/* Memory the library reads and writes in place: a direct ByteBuffer. */
%typemap(jni) (void *BUFFER, size_t BUFLEN) "jobject"
%typemap(jtype) (void *BUFFER, size_t BUFLEN) "java.nio.ByteBuffer"
%typemap(jstype) (void *BUFFER, size_t BUFLEN) "java.nio.ByteBuffer"
%typemap(javain) (void *BUFFER, size_t BUFLEN) "$javainput"
%typemap(in) (void *BUFFER, size_t BUFLEN) {
  $1 = $input ? (*jenv)->GetDirectBufferAddress(jenv, $input) : NULL;
  if (!$1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "expected a direct ByteBuffer");
    return $null;
  }
  $2 = (size_t)(*jenv)->GetDirectBufferCapacity(jenv, $input);
}

/* Bytes the library only reads: byte[] (copied). */
%typemap(jni) (const void *CBUFFER, size_t CBUFLEN) "jbyteArray"
%typemap(jtype) (const void *CBUFFER, size_t CBUFLEN) "byte[]"
%typemap(jstype) (const void *CBUFFER, size_t CBUFLEN) "byte[]"
%typemap(javain) (const void *CBUFFER, size_t CBUFLEN) "$javainput"
%typemap(in) (const void *CBUFFER, size_t CBUFLEN) {
  $1 = NULL;
  $2 = 0;
  if ($input) {
    $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
    $1 = malloc($2 ? $2 : 1);
    (*jenv)->GetByteArrayRegion(jenv, $input, 0, (jsize)$2, (jbyte *)$1);
  }
}
%typemap(freearg) (const void *CBUFFER, size_t CBUFLEN) { free((void *)$1); }

/* Arrays of handles of one kind in (Tensor[], ScriptModule[], ...; a null entry passes as NULL). */
%define DDP_JAVA_HANDLE_LIST(TYPE, ARRAY, COUNT, JCLASS)
%typemap(jni) (TYPE **ARRAY, size_t COUNT) "jlongArray"
%typemap(jtype) (TYPE **ARRAY, size_t COUNT) "long[]"
%typemap(jstype) (TYPE **ARRAY, size_t COUNT) "JCLASS[]"
%typemap(javain) (TYPE **ARRAY, size_t COUNT) "java.util.Arrays.stream($javainput).mapToLong(JCLASS::getCPtr).toArray()"
%typemap(in) (TYPE **ARRAY, size_t COUNT) {
  jlong *h;
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = (TYPE **)calloc($2 ? $2 : 1, sizeof(TYPE *));
  h = (*jenv)->GetLongArrayElements(jenv, $input, NULL);
  for (size_t i = 0; i < $2; ++i) $1[i] = (TYPE *)(intptr_t)h[i];
  (*jenv)->ReleaseLongArrayElements(jenv, $input, h, JNI_ABORT);
}
%typemap(freearg) (TYPE **ARRAY, size_t COUNT) { free($1); }
%enddef
DDP_JAVA_HANDLE_LIST(DdpTensor, TENSORS, NTENSORS, Tensor)
DDP_JAVA_HANDLE_LIST(DdpModule, MODULES, NMODULES, ScriptModule)
DDP_JAVA_HANDLE_LIST(DdpOptimizer, OPTIMIZERS, NOPTIMIZERS, Optimizer)
DDP_JAVA_HANDLE_LIST(DdpLrScheduler, SCHEDULERS, NSCHEDULERS, LrScheduler)

/* Results of several values come back as Java arrays. */
%typemap(jni) DdpTensorArray "jobjectArray"
%typemap(jtype) DdpTensorArray "Tensor[]"
%typemap(jstype) DdpTensorArray "Tensor[]"
%typemap(javaout) DdpTensorArray { return $jnicall; }
%typemap(out) DdpTensorArray {
  if ($1.items) {
    jclass cls = (*jenv)->FindClass(jenv, "org/libddp/Tensor");
    $result = (*jenv)->NewObjectArray(jenv, $1.n, cls, NULL);
    for (int i = 0; i < $1.n; ++i)
      (*jenv)->SetObjectArrayElement(jenv, $result, i, ddp_java_proxy(jenv, "org/libddp/Tensor", $1.items[i]));
    free($1.items);
  }
}
%typemap(jni) DdpBytes "jbyteArray"
%typemap(jtype) DdpBytes "byte[]"
%typemap(jstype) DdpBytes "byte[]"
%typemap(javaout) DdpBytes { return $jnicall; }
%typemap(out) DdpBytes {
  if ($1.buf) {
    jsize n = (jsize)ddp_buffer_size($1.buf);
    $result = (*jenv)->NewByteArray(jenv, n);
    (*jenv)->SetByteArrayRegion(jenv, $result, 0, n, (const jbyte *)ddp_buffer_data($1.buf));
    ddp_buffer_free($1.buf);
  }
}


%include <typemaps.i>
%apply long long *OUTPUT { long long *OUT_BEFORE, long long *OUT_AFTER, long long *OUT_ITER };
%apply long long *OUTPUT { long long *OUT_STEP, long long *OUT_EPOCH };

/* Handles: AutoCloseable; close() frees now, the finalizer otherwise. */
%define DDP_JAVA_CLOSEABLE(TYPE)
%typemap(javainterfaces) TYPE "AutoCloseable"
%typemap(javacode) TYPE %{
  /** Frees the handle now; later calls are harmless. */
  @Override
  public void close() { delete(); }
%}
%enddef
%typemap(javainterfaces) DdpGroup "AutoCloseable"
/* The async collectives keep their tensor alive through the Java wrappers below. */
%rename(allReduceAsyncNative) DdpGroup::all_reduce_async;
%rename(broadcastAsyncNative) DdpGroup::broadcast_async;
%rename(reduceAsyncNative) DdpGroup::reduce_async;
%rename(allGatherAsyncNative) DdpGroup::all_gather_async;
%javamethodmodifiers DdpGroup::all_reduce_async "protected";
%javamethodmodifiers DdpGroup::broadcast_async "protected";
%javamethodmodifiers DdpGroup::reduce_async "protected";
%javamethodmodifiers DdpGroup::all_gather_async "protected";
/* Object.wait(long) is final: Java's name for Work.wait is waitFor. */
%rename(waitFor) DdpWork::wait;
%typemap(javacode) DdpGroup %{
  /** The group the environment describes (torchrun, SLURM, ddprun, ...). */
  public static Group fromEnvironment() { return new Group(-1, 1, "127.0.0.1", 0, null, 0); }

  /** all_reduce without waiting: wait on the Work (in the order the works were started). */
  public Work allReduceAsync(Tensor t, ReduceOp op) { return kept(allReduceAsyncNative(t, op), t); }
  public Work broadcastAsync(Tensor t, int src) { return kept(broadcastAsyncNative(t, src), t); }
  public Work reduceAsync(Tensor t, int dst, ReduceOp op) { return kept(reduceAsyncNative(t, dst, op), t); }
  public Work allGatherAsync(Tensor t) { return kept(allGatherAsyncNative(t), t); }

  private static Work kept(Work w, Tensor t) {
    w.kept = t;  // the tensor (and the memory it views) lives as long as the work
    return w;
  }

  @Override
  public void close() { delete(); }
%}
DDP_JAVA_CLOSEABLE(DdpCommHook)
%javamethodmodifiers DdpReducer::DdpReducer "protected";  /* Reducer.create keeps the gradients alive */
%rename(withOptionsNative) DdpReducer::with_options;
%javamethodmodifiers DdpReducer::with_options "protected";  /* Reducer.withOptions keeps them alive */
%typemap(javainterfaces) DdpReducer "AutoCloseable"
%typemap(javacode) DdpReducer %{
  private Tensor[] gradients;  // the memory the reducer reduces in place

  /** A reducer over wrapped gradient buffers; keeps them alive. */
  public static Reducer create(Group group, Tensor[] gradients, double bucketCapMb, double firstBucketMb,
                               boolean findUnusedParameters) {
    Reducer r = new Reducer(group, gradients, bucketCapMb, firstBucketMb, findUnusedParameters);
    r.gradients = gradients.clone();
    return r;
  }

  /** A reducer with every option of ReducerOptions (broadcastParameters, joinEnabled, ...); keeps the gradients alive. */
  public static Reducer withOptions(Group group, Tensor[] gradients, ReducerOptions options) {
    Reducer r = withOptionsNative(group, gradients, options);
    r.gradients = gradients.clone();
    return r;
  }

  @Override
  public void close() { delete(); }
%}
DDP_JAVA_CLOSEABLE(DdpModelAverager)
%typemap(javainterfaces) DdpModule "AutoCloseable"
%typemap(javacode) DdpModule %{
  /** The module's method (null: forward) on positional inputs only. */
  public Outputs call(String method, Tensor[] inputs) { return call(method, inputs, new String[0], new Tensor[0]); }

  @Override
  public void close() { delete(); }
%}
DDP_JAVA_CLOSEABLE(DdpOptimizer)
DDP_JAVA_CLOSEABLE(DdpLrScheduler)
DDP_JAVA_CLOSEABLE(DdpEnv)
DDP_JAVA_CLOSEABLE(DdpOutputs)
DDP_JAVA_CLOSEABLE(DdpMetric)
DDP_JAVA_CLOSEABLE(DdpParamGroups)
DDP_JAVA_CLOSEABLE(struct ddp_loss_options)
%typemap(javainterfaces) DdpWork "AutoCloseable"
%typemap(javacode) DdpWork %{
  Object kept;  // the tensor the collective works on, alive until this work goes

  /** Frees the handle now; later calls are harmless. */
  @Override
  public void close() { delete(); }
%}
DDP_JAVA_CLOSEABLE(struct ddp_strategy_options)
DDP_JAVA_CLOSEABLE(struct ddp_reducer_options)
DDP_JAVA_CLOSEABLE(struct ddp_sgd_options)
DDP_JAVA_CLOSEABLE(struct ddp_adam_options)
DDP_JAVA_CLOSEABLE(struct ddp_sampler_options)
DDP_JAVA_CLOSEABLE(struct ddp_lr_scheduler_options)
DDP_JAVA_CLOSEABLE(struct ddp_checkpoint_info)
%typemap(javainterfaces) DdpStrategy "AutoCloseable"
%typemap(javacode) DdpStrategy %{
  /** DDPStrategy with Lightning's defaults, `devices` processes on this node. */
  public static Strategy withDevices(int devices) {
    return new Strategy(devices, null, 0, 25, 1, false, true, null, 0, 0);
  }

  /** Lightning's reduce over the strategy's own group. */
  public void reduce(Tensor t, ReduceOp op) { reduce(t, op, null); }
  /** Lightning's all_gather over the strategy's own group, without sync_grads. */
  public Tensor allGather(Tensor t) { return allGather(t, false, null); }
  /** The module's method on positional inputs only. */
  public Outputs call(ScriptModule module, String method, Tensor[] inputs) {
    return call(module, method, inputs, new String[0], new Tensor[0]);
  }

  @Override
  public void close() { delete(); }
%}

/* Tensor.wrap keeps its ByteBuffer alive; the native form is wrapNative. */
%rename(wrapNative) DdpTensor::wrap;
%javamethodmodifiers DdpTensor::wrap "protected";
%typemap(javainterfaces) DdpTensor "AutoCloseable"
%typemap(javacode) DdpTensor %{
  private Object owner;  // the memory a wrapped tensor views

  /** A tensor viewing a direct ByteBuffer (native byte order), without copying. */
  public static Tensor wrap(java.nio.ByteBuffer buffer, DType dtype, long[] shape) {
    Tensor t = wrapNative(buffer, dtype, shape);
    t.owner = buffer;
    return t;
  }

  @Override
  public void close() { delete(); }
%}

/* ---- spawn with a Java callback --------------------------------------------
 * fn.run(worker, arg) runs in each of nprocs processes: popen re-runs this
 * Java program (same command line) up to the spawn call, which then becomes
 * the worker. Returns rank 0's result (worker.set_result). */
%{
static JavaVM *ddp_java_vm = NULL;
static jobject ddp_java_worker_fn = NULL; /* global reference to an org.libddp.WorkerFunction */

static void ddp_java_flush(JNIEnv *env, const char *stream) {
  jclass sys = (*env)->FindClass(env, "java/lang/System");
  jfieldID f = sys ? (*env)->GetStaticFieldID(env, sys, stream, "Ljava/io/PrintStream;") : NULL;
  jobject ps = f ? (*env)->GetStaticObjectField(env, sys, f) : NULL;
  jmethodID flush = ps ? (*env)->GetMethodID(env, (*env)->GetObjectClass(env, ps), "flush", "()V") : NULL;
  if (flush) (*env)->CallVoidMethod(env, ps, flush);
  (*env)->ExceptionClear(env);
}

static int ddp_java_trampoline(ddp_worker *w, const void *arg, size_t len) {
  JNIEnv *env = NULL;
  jint rc = 1;
  if ((*ddp_java_vm)->GetEnv(ddp_java_vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return 1;
  jclass wcls = (*env)->FindClass(env, "org/libddp/Worker");
  jmethodID wctor = wcls ? (*env)->GetMethodID(env, wcls, "<init>", "(JZ)V") : NULL;
  jobject jw = wctor ? (*env)->NewObject(env, wcls, wctor, (jlong)(intptr_t)w, JNI_FALSE) : NULL;
  jbyteArray ja = (*env)->NewByteArray(env, (jsize)len);
  if (ja && len) (*env)->SetByteArrayRegion(env, ja, 0, (jsize)len, (const jbyte *)arg);
  jmethodID run = (*env)->GetMethodID(env, (*env)->GetObjectClass(env, ddp_java_worker_fn), "run",
                                      "(Lorg/libddp/Worker;[B)I");
  if (jw && ja && run) rc = (*env)->CallIntMethod(env, ddp_java_worker_fn, run, jw, ja);
  if ((*env)->ExceptionCheck(env)) { /* the stack trace, then a failing exit code for the launcher */
    (*env)->ExceptionDescribe(env);
    (*env)->ExceptionClear(env);
    rc = 1;
  }
  /* The worker process ends in C right after this: flush Java's streams. */
  ddp_java_flush(env, "out");
  ddp_java_flush(env, "err");
  return (int)rc;
}

typedef struct { int unused; } DdpJavaWorkerFn; /* stands for the Java callback in signatures */

static DdpBytes ddp_java_spawn(DdpJavaWorkerFn *fn, int nprocs, const void *CBUFFER, size_t CBUFLEN,
                               ddp_start_method start_method, long long timeout_ms) {
  ddp_spawn_options o = DDP_SPAWN_OPTIONS_INIT;
  DdpBytes out = {NULL};
  (void)fn; /* already stored by its typemap */
  o.nprocs = nprocs;
  o.start_method = start_method;
  o.timeout_ms = timeout_ms;
  ddp_swig_check(ddp_spawn(&o, ddp_java_trampoline, CBUFFER, CBUFLEN, &out.buf));
  return out;
}
%}

%typemap(jni) DdpJavaWorkerFn *FN "jobject"
%typemap(jtype) DdpJavaWorkerFn *FN "WorkerFunction"
%typemap(jstype) DdpJavaWorkerFn *FN "WorkerFunction"
%typemap(javain) DdpJavaWorkerFn *FN "$javainput"
%typemap(in) DdpJavaWorkerFn *FN {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "spawn: fn is null");
    return $null;
  }
  (*jenv)->GetJavaVM(jenv, &ddp_java_vm);
  if (ddp_java_worker_fn) (*jenv)->DeleteGlobalRef(jenv, ddp_java_worker_fn);
  ddp_java_worker_fn = (*jenv)->NewGlobalRef(jenv, $input);
  $1 = NULL;
}

%rename(spawn) ddp_java_spawn;
DdpBytes ddp_java_spawn(DdpJavaWorkerFn *FN, int nprocs, const void *CBUFFER, size_t CBUFLEN,
                        ddp_start_method start_method, long long timeout_ms);

/* ---- custom comm hooks: a Java CommHookFunction ----------------------------
 * The classes and methods are looked up on the Java thread that makes the
 * hook: the hook may run on a native thread, attached here as a daemon,
 * whose class loader would not see the application's classes. */
%{
typedef struct {
  jobject fn;          /* global reference to the CommHookFunction */
  jclass group_cls, tensor_cls, bucket_cls, long_array_cls, ddp_exception_cls;
  jmethodID group_ctor, tensor_ctor, bucket_ctor, run;
  jfieldID status;
} DdpJavaHook;

static JavaVM *ddp_java_hook_vm = NULL;

static jlongArray ddp_java_longs(JNIEnv *env, const int64_t *v, size_t n) {
  jlongArray a = (*env)->NewLongArray(env, (jsize)n);
  if (a && n) (*env)->SetLongArrayRegion(env, a, 0, (jsize)n, (const jlong *)v);
  return a;
}

static ddp_status ddp_java_hook_trampoline(ddp_group *group, const ddp_comm_bucket *b, void *user) {
  DdpJavaHook *h = (DdpJavaHook *)user;
  JNIEnv *env = NULL;
  if ((*ddp_java_hook_vm)->GetEnv(ddp_java_hook_vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK &&
      (*ddp_java_hook_vm)->AttachCurrentThreadAsDaemon(ddp_java_hook_vm, (void **)&env, NULL) != JNI_OK) {
    ddp_error_set("the Java comm hook's thread cannot attach to the JVM");
    return DDP_E_INTERNAL;
  }
  if ((*env)->PushLocalFrame(env, 32 + (jint)b->num_params) < 0) return DDP_E_NOMEM;
  ddp_status rc = DDP_OK;
  jobject jg = (*env)->NewObject(env, h->group_cls, h->group_ctor, (jlong)(intptr_t)group, JNI_FALSE);
  jobject jt = (*env)->NewObject(env, h->tensor_cls, h->tensor_ctor, (jlong)(intptr_t)b->buffer, JNI_FALSE);
  int64_t *idx = (int64_t *)calloc(b->num_params ? b->num_params : 1, sizeof(int64_t));
  for (size_t k = 0; idx && k < b->num_params; ++k) idx[k] = (int64_t)b->param_indices[k];
  jlongArray jidx = idx ? ddp_java_longs(env, idx, b->num_params) : NULL;
  free(idx);
  jlongArray joff = ddp_java_longs(env, b->offsets, b->num_params);
  jobjectArray jshapes = (*env)->NewObjectArray(env, (jsize)b->num_params, h->long_array_cls, NULL);
  for (size_t k = 0; jshapes && k < b->num_params; ++k)
    (*env)->SetObjectArrayElement(env, jshapes, (jsize)k, ddp_java_longs(env, b->shapes[k], b->ndims[k]));
  jobject jb = jg && jt && jidx && joff && jshapes
                   ? (*env)->NewObject(env, h->bucket_cls, h->bucket_ctor, jt, (jlong)b->index,
                                       b->is_last ? JNI_TRUE : JNI_FALSE, (jint)b->divisor, jidx, joff, jshapes)
                   : NULL;
  if (jb) (*env)->CallVoidMethod(env, h->fn, h->run, jg, jb);
  jthrowable exc = (*env)->ExceptionOccurred(env);
  if (exc || !jb) {
    (*env)->ExceptionClear(env);
    rc = DDP_E_INTERNAL;
    if (exc && (*env)->IsInstanceOf(env, exc, h->ddp_exception_cls)) {
      rc = (ddp_status)(*env)->GetIntField(env, exc, h->status);
      if (rc == DDP_OK) rc = DDP_E_INTERNAL;
    }
    /* Throwable.toString(): the class and the message, as the reason on every rank. */
    jmethodID to_string = exc ? (*env)->GetMethodID(env, (*env)->GetObjectClass(env, exc), "toString",
                                                    "()Ljava/lang/String;") : NULL;
    jstring text = to_string ? (jstring)(*env)->CallObjectMethod(env, exc, to_string) : NULL;
    const char *utf = text ? (*env)->GetStringUTFChars(env, text, NULL) : NULL;
    ddp_error_set(utf ? utf : "the Java comm hook could not be called");
    if (utf) (*env)->ReleaseStringUTFChars(env, text, utf);
    (*env)->ExceptionClear(env);
  }
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

static jclass ddp_java_global_class(JNIEnv *env, const char *name) {
  jclass local = (*env)->FindClass(env, name);
  jclass global = local ? (jclass)(*env)->NewGlobalRef(env, local) : NULL;
  if (local) (*env)->DeleteLocalRef(env, local);
  return global;
}

/* The hook and its references live as long as the process: reducers and
 * strategies may hold the hook after the Java object is collected. */
static DdpCommHook *ddp_java_comm_hook_custom(JNIEnv *env, jobject fn) {
  DdpCommHook *out = NULL;
  DdpJavaHook *h = (DdpJavaHook *)calloc(1, sizeof *h);
  if (!h) { ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding"); return NULL; }
  (*env)->GetJavaVM(env, &ddp_java_hook_vm);
  h->group_cls = ddp_java_global_class(env, "org/libddp/Group");
  h->tensor_cls = ddp_java_global_class(env, "org/libddp/Tensor");
  h->bucket_cls = ddp_java_global_class(env, "org/libddp/CommBucket");
  h->long_array_cls = ddp_java_global_class(env, "[J");
  h->ddp_exception_cls = ddp_java_global_class(env, "org/libddp/DdpException");
  jclass fn_cls = (*env)->GetObjectClass(env, fn);
  if (h->group_cls && h->tensor_cls && h->bucket_cls && h->long_array_cls && h->ddp_exception_cls && fn_cls) {
    h->group_ctor = (*env)->GetMethodID(env, h->group_cls, "<init>", "(JZ)V");
    h->tensor_ctor = (*env)->GetMethodID(env, h->tensor_cls, "<init>", "(JZ)V");
    h->bucket_ctor = (*env)->GetMethodID(env, h->bucket_cls, "<init>", "(Lorg/libddp/Tensor;JZI[J[J[[J)V");
    h->run = (*env)->GetMethodID(env, fn_cls, "run", "(Lorg/libddp/Group;Lorg/libddp/CommBucket;)V");
    h->status = (*env)->GetFieldID(env, h->ddp_exception_cls, "status", "I");
  }
  if (!h->group_ctor || !h->tensor_ctor || !h->bucket_ctor || !h->run || !h->status) {
    (*env)->ExceptionClear(env);
    ddp_error_set("CommHook.custom: the binding's classes are incomplete");
    ddp_swig_check(DDP_E_INTERNAL);
    return NULL;
  }
  h->fn = (*env)->NewGlobalRef(env, fn);
  ddp_swig_check(ddp_comm_hook_custom(&out, ddp_java_hook_trampoline, h));
  return out;
}
%}
%typemap(jni) DdpJavaHookFn *HOOKFN "jobject"
%typemap(jtype) DdpJavaHookFn *HOOKFN "CommHookFunction"
%typemap(jstype) DdpJavaHookFn *HOOKFN "CommHookFunction"
%typemap(javain) DdpJavaHookFn *HOOKFN "$javainput"
%typemap(in) DdpJavaHookFn *HOOKFN {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "CommHook.custom: fn is null");
    return $null;
  }
  /* Made here, where the JNI environment is at hand; the method below hands it out. */
  $1 = (DdpJavaHookFn *)ddp_java_comm_hook_custom(jenv, $input);
  if (!$1) {
    ddp_java_throw(jenv, ddp_swig_status);
    return $null;
  }
}
%{ typedef struct DdpJavaHookFn DdpJavaHookFn; /* stands for the Java object in signatures */ %}
%newobject DdpCommHook::custom;
%extend DdpCommHook {
  /* A comm hook written in Java (CommHookFunction). */
  static DdpCommHook *custom(DdpJavaHookFn *HOOKFN) { return (DdpCommHook *)HOOKFN; }
}

/* ---- the caller's own optimizer step: a Java OptimizerStep ------------------
 * Strategy.optimizerStepFn(fn): the precision's step around fn.step(), on
 * the calling thread; an exception fn throws comes back out of the call. */
%{
typedef struct {
  JNIEnv *env;
  jobject fn;
  jthrowable thrown; /* fn's exception, thrown again after the C call */
} DdpJavaStepFn;

static int ddp_java_step_trampoline(void *user) {
  DdpJavaStepFn *call = (DdpJavaStepFn *)user;
  JNIEnv *env = call->env;
  jmethodID step = (*env)->GetMethodID(env, (*env)->GetObjectClass(env, call->fn), "step", "()V");
  if (step) (*env)->CallVoidMethod(env, call->fn, step);
  if ((*env)->ExceptionCheck(env)) {
    call->thrown = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    ddp_error_set("the optimizer step function threw an exception");
    return 1;
  }
  return 0;
}
%}
%typemap(jni) DdpJavaStepFn *STEPFN "jobject"
%typemap(jtype) DdpJavaStepFn *STEPFN "OptimizerStep"
%typemap(jstype) DdpJavaStepFn *STEPFN "OptimizerStep"
%typemap(javain) DdpJavaStepFn *STEPFN "$javainput"
%typemap(in) DdpJavaStepFn *STEPFN (DdpJavaStepFn call) {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "optimizerStepFn: fn is null");
    return $null;
  }
  call.env = jenv;
  call.fn = $input;
  call.thrown = NULL;
  $1 = &call;
}
%extend DdpStrategy {
  /* The precision's step around fn.step() (the caller's own optimizer);
   * false when the gradient scaler skipped it. */
  bool optimizer_step_fn(DdpJavaStepFn *STEPFN) {
    int stepped = 0;
    ddp_status s = ddp_strategy_optimizer_step_fn($self, ddp_java_step_trampoline, STEPFN, &stepped);
    if (STEPFN->thrown) (*STEPFN->env)->Throw(STEPFN->env, STEPFN->thrown);
    ddp_swig_check(s);
    return stepped != 0;
  }
}

/* ---- checkpoint IO and the cluster environment as Java objects -------------
 * StrategyOptions.useCheckpointIo(CheckpointIO) / useClusterEnvironment(
 * ClusterEnvironment): the C API copies the tables; the objects (global
 * references) are kept for the life of the process, as a strategy may call
 * them until it is freed. Methods are looked up on the Java thread that sets
 * them; the callbacks run on the thread that called the strategy. */
%{
typedef struct {
  ddp_checkpoint_io table;
  JavaVM *vm;
  jobject io;
  jmethodID save, load, remove;
} DdpJavaIO;

typedef struct {
  ddp_cluster_callbacks table;
  JavaVM *vm;
  jobject env;
  jmethodID world_size, global_rank, local_rank, local_world_size, node_rank, main_address, main_port;
  char address[256]; /* mainAddress's value, which the C API copies at once */
} DdpJavaCluster;

static JNIEnv *ddp_java_attached(JavaVM *vm) {
  JNIEnv *env = NULL;
  if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK &&
      (*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&env, NULL) != JNI_OK)
    return NULL;
  return env;
}

/* 0, or 1 with the pending exception's stack trace printed and cleared. */
static int ddp_java_callback_done(JNIEnv *env) {
  if (!(*env)->ExceptionCheck(env)) return 0;
  (*env)->ExceptionDescribe(env);
  (*env)->ExceptionClear(env);
  return 1;
}

static int ddp_java_io_save(void *user, const char *path, const void *data, size_t len) {
  DdpJavaIO *h = (DdpJavaIO *)user;
  JNIEnv *env = ddp_java_attached(h->vm);
  if (!env || (*env)->PushLocalFrame(env, 8) < 0) return 1;
  jstring jpath = (*env)->NewStringUTF(env, path);
  jbyteArray bytes = len <= 0x7fffffff ? (*env)->NewByteArray(env, (jsize)len) : NULL;
  if (bytes && len) (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)len, (const jbyte *)data);
  if (jpath && bytes) (*env)->CallVoidMethod(env, h->io, h->save, jpath, bytes);
  int rc = ddp_java_callback_done(env) || !jpath || !bytes;
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

static int ddp_java_io_load(void *user, const char *path, ddp_byte_sink *sink) {
  DdpJavaIO *h = (DdpJavaIO *)user;
  JNIEnv *env = ddp_java_attached(h->vm);
  if (!env || (*env)->PushLocalFrame(env, 8) < 0) return 1;
  jstring jpath = (*env)->NewStringUTF(env, path);
  jbyteArray bytes = jpath ? (jbyteArray)(*env)->CallObjectMethod(env, h->io, h->load, jpath) : NULL;
  int rc = ddp_java_callback_done(env) || !bytes;
  if (!rc) {
    jsize n = (*env)->GetArrayLength(env, bytes);
    jbyte *p = (*env)->GetByteArrayElements(env, bytes, NULL);
    rc = !p || ddp_byte_sink_write(sink, p, (size_t)n) != DDP_OK;
    if (p) (*env)->ReleaseByteArrayElements(env, bytes, p, JNI_ABORT);
  }
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

static int ddp_java_io_remove(void *user, const char *path) {
  DdpJavaIO *h = (DdpJavaIO *)user;
  JNIEnv *env = ddp_java_attached(h->vm);
  if (!env || (*env)->PushLocalFrame(env, 4) < 0) return 1;
  jstring jpath = (*env)->NewStringUTF(env, path);
  if (jpath) (*env)->CallVoidMethod(env, h->io, h->remove, jpath);
  int rc = ddp_java_callback_done(env) || !jpath;
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

static int ddp_java_cluster_int(DdpJavaCluster *c, jmethodID method) {
  JNIEnv *env = ddp_java_attached(c->vm);
  if (!env) return -1;
  jint v = (*env)->CallIntMethod(env, c->env, method);
  return ddp_java_callback_done(env) ? -1 : (int)v;
}
#define DDP_JAVA_CLUSTER_INT(NAME) \
  static int ddp_java_cluster_##NAME(void *u) { return ddp_java_cluster_int((DdpJavaCluster *)u, ((DdpJavaCluster *)u)->NAME); }
DDP_JAVA_CLUSTER_INT(world_size)
DDP_JAVA_CLUSTER_INT(global_rank)
DDP_JAVA_CLUSTER_INT(local_rank)
DDP_JAVA_CLUSTER_INT(local_world_size)
DDP_JAVA_CLUSTER_INT(node_rank)
DDP_JAVA_CLUSTER_INT(main_port)

static const char *ddp_java_cluster_main_address(void *user) {
  DdpJavaCluster *c = (DdpJavaCluster *)user;
  JNIEnv *env = ddp_java_attached(c->vm);
  if (!env || (*env)->PushLocalFrame(env, 4) < 0) return NULL;
  jstring s = (jstring)(*env)->CallObjectMethod(env, c->env, c->main_address);
  const char *out = NULL;
  if (!ddp_java_callback_done(env) && s) {
    const char *utf = (*env)->GetStringUTFChars(env, s, NULL);
    if (utf && strlen(utf) < sizeof c->address) {
      strcpy(c->address, utf);
      out = c->address;
    }
    if (utf) (*env)->ReleaseStringUTFChars(env, s, utf);
  }
  (*env)->PopLocalFrame(env, NULL);
  return out;
}

/* The method of obj's class, or 0 with the reason set. */
static jmethodID ddp_java_method(JNIEnv *env, jobject obj, const char *name, const char *signature) {
  jmethodID m = (*env)->GetMethodID(env, (*env)->GetObjectClass(env, obj), name, signature);
  if (!m) {
    (*env)->ExceptionClear(env);
    ddp_error_set(name);
  }
  return m;
}
%}
/* The JNI environment of the call, for methods that keep Java objects. */
%typemap(in, numinputs=0) JNIEnv *JENV %{ $1 = jenv; %}
%typemap(jni) jobject IO_OBJECT "jobject"
%typemap(jtype) jobject IO_OBJECT "CheckpointIO"
%typemap(jstype) jobject IO_OBJECT "CheckpointIO"
%typemap(javain) jobject IO_OBJECT "$javainput"
%typemap(in) jobject IO_OBJECT { $1 = $input; }
%typemap(jni) jobject ENV_OBJECT "jobject"
%typemap(jtype) jobject ENV_OBJECT "ClusterEnvironment"
%typemap(jstype) jobject ENV_OBJECT "ClusterEnvironment"
%typemap(javain) jobject ENV_OBJECT "$javainput"
%typemap(in) jobject ENV_OBJECT { $1 = $input; }
%extend ddp_strategy_options {
  /* Lightning's CheckpointIO written in Java for the strategies made from these options. */
  void use_checkpoint_io(JNIEnv *JENV, jobject IO_OBJECT) {
    JNIEnv *jenv = JENV;
    DdpJavaIO *h = (DdpJavaIO *)calloc(1, sizeof *h);
    if (!h || !IO_OBJECT) {
      free(h);
      ddp_swig_fail(h ? DDP_E_INVALID_ARGUMENT : DDP_E_NOMEM, "useCheckpointIo: io is null");
      return;
    }
    (*jenv)->GetJavaVM(jenv, &h->vm);
    h->save = ddp_java_method(jenv, IO_OBJECT, "save", "(Ljava/lang/String;[B)V");
    h->load = ddp_java_method(jenv, IO_OBJECT, "load", "(Ljava/lang/String;)[B");
    h->remove = ddp_java_method(jenv, IO_OBJECT, "remove", "(Ljava/lang/String;)V");
    if (!h->save || !h->load || !h->remove) {
      free(h);
      ddp_swig_fail(DDP_E_INTERNAL, "useCheckpointIo: the object lacks a CheckpointIO method");
      return;
    }
    h->io = (*jenv)->NewGlobalRef(jenv, IO_OBJECT);
    h->table.user_data = h;
    h->table.save = ddp_java_io_save;
    h->table.load = ddp_java_io_load;
    h->table.remove = ddp_java_io_remove;
    $self->checkpoint_io = &h->table;
  }
  /* Lightning's ClusterEnvironment written in Java for the strategies made from these options. */
  void use_cluster_environment(JNIEnv *JENV, jobject ENV_OBJECT) {
    JNIEnv *jenv = JENV;
    DdpJavaCluster *c = (DdpJavaCluster *)calloc(1, sizeof *c);
    if (!c || !ENV_OBJECT) {
      free(c);
      ddp_swig_fail(c ? DDP_E_INVALID_ARGUMENT : DDP_E_NOMEM, "useClusterEnvironment: env is null");
      return;
    }
    (*jenv)->GetJavaVM(jenv, &c->vm);
    c->world_size = ddp_java_method(jenv, ENV_OBJECT, "worldSize", "()I");
    c->global_rank = ddp_java_method(jenv, ENV_OBJECT, "globalRank", "()I");
    c->local_rank = ddp_java_method(jenv, ENV_OBJECT, "localRank", "()I");
    c->local_world_size = ddp_java_method(jenv, ENV_OBJECT, "localWorldSize", "()I");
    c->node_rank = ddp_java_method(jenv, ENV_OBJECT, "nodeRank", "()I");
    c->main_address = ddp_java_method(jenv, ENV_OBJECT, "mainAddress", "()Ljava/lang/String;");
    c->main_port = ddp_java_method(jenv, ENV_OBJECT, "mainPort", "()I");
    if (!c->world_size || !c->global_rank || !c->local_rank || !c->local_world_size || !c->node_rank ||
        !c->main_address || !c->main_port) {
      free(c);
      ddp_swig_fail(DDP_E_INTERNAL, "useClusterEnvironment: the object lacks a ClusterEnvironment method");
      return;
    }
    c->env = (*jenv)->NewGlobalRef(jenv, ENV_OBJECT);
    c->table.user_data = c;
    c->table.world_size = ddp_java_cluster_world_size;
    c->table.global_rank = ddp_java_cluster_global_rank;
    c->table.local_rank = ddp_java_cluster_local_rank;
    c->table.local_world_size = ddp_java_cluster_local_world_size;
    c->table.node_rank = ddp_java_cluster_node_rank;
    c->table.main_address = ddp_java_cluster_main_address;
    c->table.main_port = ddp_java_cluster_main_port;
    $self->cluster_callbacks = &c->table;
  }
}
