//! LibTorch tensors by address (the `tch` feature): tensors a foreign
//! binding made (here tests/torch/aten_helper.cpp, loaded from
//! DDP_TEST_ATEN_LIB, which CTest sets; tch-rs cannot be installed here)
//! become a libddp module that shares their memory; another LibTorch
//! version and a null pointer are refused by name.
#![cfg(feature = "tch")]
use std::ffi::{c_void, CString};
use std::os::raw::{c_char, c_int};

use ddp::torch::{self, Named};
use ddp::{sys, Module};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

struct Helper {
    new: extern "C" fn(*const f32, i64, c_int) -> *mut c_void,
    read: extern "C" fn(*const c_void, *mut f32, i64),
    free: extern "C" fn(*mut c_void),
}

fn helper() -> Option<Helper> {
    let path = std::env::var("DDP_TEST_ATEN_LIB").ok()?;
    let path = CString::new(path).unwrap();
    unsafe {
        let lib = dlopen(path.as_ptr(), 2 /* RTLD_NOW */);
        assert!(!lib.is_null(), "cannot load DDP_TEST_ATEN_LIB");
        let sym = |name: &str| {
            let n = CString::new(name).unwrap();
            let f = dlsym(lib, n.as_ptr());
            assert!(!f.is_null(), "{name} missing");
            f
        };
        Some(Helper {
            new: std::mem::transmute(sym("ddp_test_aten_new")),
            read: std::mem::transmute(sym("ddp_test_aten_read")),
            free: std::mem::transmute(sym("ddp_test_aten_free")),
        })
    }
}

#[test]
fn libtorch_tensors_by_address_are_the_model_and_other_versions_are_refused() {
    let Some(h) = helper() else {
        println!("skipped: DDP_TEST_ATEN_LIB is not set (CTest sets it)");
        return;
    };
    let version = torch::version();
    torch::check_version(&version).expect("libddp's own version");
    let e = torch::check_version("1.13.1").unwrap_err();
    assert_eq!(e.status, sys::DDP_E_UNSUPPORTED);
    assert!(e.message.contains("1.13.1") && e.message.contains(&version), "{}", e.message);

    let w = (h.new)([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].as_ptr(), 6, 1);
    let rm = (h.new)([0.0f32, 0.0].as_ptr(), 2, 0);
    let named = [
        Named { name: "fc.weight", tensor: w, buffer: false },
        Named { name: "norm.running_mean", tensor: rm, buffer: true },
    ];
    let m = unsafe { Module::from_torch_tensors(&version, &named) }.expect("module");
    assert_eq!(m.num_parameters(), 1);
    // The module is the caller's memory: a value set through libddp is in
    // the foreign tensor.
    let mut nines = [9.0f32; 6];
    let shape = [6i64];
    let mut value = std::ptr::null_mut();
    unsafe {
        assert_eq!(
            sys::ddp_tensor_from_blob(&mut value, nines.as_mut_ptr() as *mut c_void, sys::DDP_FLOAT32, shape.as_ptr(), 1),
            sys::DDP_OK
        );
        let name = CString::new("fc.weight").unwrap();
        assert_eq!(sys::ddp_module_set(m.as_raw(), name.as_ptr(), value), sys::DDP_OK);
        sys::ddp_tensor_free(value);
    }
    let mut back = [0.0f32; 6];
    (h.read)(w, back.as_mut_ptr(), 6);
    assert_eq!(back, [9.0; 6]);
    drop(m);

    // Both ways by address: libddp computes on the caller's tensor and hands the result back.
    let x = unsafe { ddp::Tensor::from_aten(&version, w) }.expect("from_aten");
    let doubled = (&x * 2.0).unwrap();
    let out = (h.new)([0.0f32; 6].as_ptr(), 6, 0);
    unsafe { doubled.to_aten(&version, out) }.expect("to_aten");
    let mut got = [0.0f32; 6];
    (h.read)(out, got.as_mut_ptr(), 6);
    assert_eq!(got, [18.0; 6]);
    assert!(unsafe { doubled.to_aten("1.13.1", out) }.is_err()); // another LibTorch is refused
    (h.free)(out);
    let e = unsafe { ddp::Optimizer::from_torch(&version, std::ptr::null_mut()) }.err().expect("a null optimizer");
    assert_eq!(e.status, sys::DDP_E_INVALID_ARGUMENT);

    let e = unsafe { Module::from_torch_tensors("2.0.1", &named) }.err().expect("another LibTorch refused");
    assert_eq!(e.status, sys::DDP_E_UNSUPPORTED);
    let null = [Named { name: "fc.weight", tensor: std::ptr::null(), buffer: false }];
    let e = unsafe { Module::from_torch_tensors(&version, &null) }.err().expect("a null pointer refused");
    assert_eq!(e.status, sys::DDP_E_INVALID_ARGUMENT);
    assert!(e.message.contains("'fc.weight' is a null pointer"), "{}", e.message);
    (h.free)(w);
    (h.free)(rm);
}
