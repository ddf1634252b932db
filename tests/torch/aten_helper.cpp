// A stand-in for a foreign LibTorch binding in the binding tests: JavaCPP's
// presets and tch-rs hold at::Tensor objects by address, and cannot be
// installed here, so this small library makes such tensors for the Rust
// test (by dlopen) and the Java test (through JNI, aten_helper_jni.cpp).
#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>

extern "C" {

// A new at::Tensor holding a copy of data[0..n) (float32, 1-D), a leaf
// that requires grad when asked; its address, freed by ddp_test_aten_free.
__attribute__((visibility("default"))) void* ddp_test_aten_new(const float* data, int64_t n, int requires_grad) {
  at::Tensor t = at::empty({n}, at::kFloat);
  std::memcpy(t.data_ptr<float>(), data, static_cast<size_t>(n) * sizeof(float));
  if (requires_grad) t.set_requires_grad(true);
  return new at::Tensor(std::move(t));
}

// Copies the tensor's n values into out.
__attribute__((visibility("default"))) void ddp_test_aten_read(const void* t, float* out, int64_t n) {
  std::memcpy(out, static_cast<const at::Tensor*>(t)->data_ptr<float>(), static_cast<size_t>(n) * sizeof(float));
}

__attribute__((visibility("default"))) void ddp_test_aten_free(void* t) { delete static_cast<at::Tensor*>(t); }

}  // extern "C"

#ifdef DDP_TEST_JNI
// The same for the Java test's class AtenHelper (default package), as a
// JavaCPP Tensor would hand over its address().
#include <jni.h>

extern "C" {

JNIEXPORT jlong JNICALL Java_AtenHelper_newTensor(JNIEnv* env, jclass, jfloatArray data, jboolean requires_grad) {
  jsize n = env->GetArrayLength(data);
  jfloat* p = env->GetFloatArrayElements(data, nullptr);
  void* t = ddp_test_aten_new(p, n, requires_grad ? 1 : 0);
  env->ReleaseFloatArrayElements(data, p, JNI_ABORT);
  return static_cast<jlong>(reinterpret_cast<intptr_t>(t));
}

JNIEXPORT void JNICALL Java_AtenHelper_read(JNIEnv* env, jclass, jlong address, jfloatArray out) {
  jsize n = env->GetArrayLength(out);
  jfloat* p = env->GetFloatArrayElements(out, nullptr);
  ddp_test_aten_read(reinterpret_cast<const void*>(static_cast<intptr_t>(address)), p, n);
  env->ReleaseFloatArrayElements(out, p, 0);
}

JNIEXPORT void JNICALL Java_AtenHelper_free(JNIEnv*, jclass, jlong address) {
  ddp_test_aten_free(reinterpret_cast<void*>(static_cast<intptr_t>(address)));
}

}  // extern "C"
#endif
