//! Lightning's CheckpointIO and ClusterEnvironment written in Rust: traits
//! the strategy calls through the C API's callback tables
//! (`ddp_checkpoint_io`, `ddp_cluster_callbacks`). The strategy keeps the
//! objects until it is dropped; a panic in a method is caught at the C
//! boundary and becomes that callback's failure.
use super::*;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

/// Where the strategy's checkpoint bytes are stored (Lightning's
/// CheckpointIO): save and remove run on global rank 0, load on every rank.
/// An `Err` fails the strategy's call with `DDP_E_IO` naming the callback
/// and the path on every rank.
pub trait CheckpointIo: Send + Sync {
    /// Stores `data` under `path`, whole or not at all.
    fn save(&self, path: &str, data: &[u8]) -> Result<()>;
    /// The bytes stored under `path`.
    fn load(&self, path: &str) -> Result<Vec<u8>>;
    /// Removes `path`.
    fn remove(&self, path: &str) -> Result<()>;
}

/// This process's place in the job (Lightning's ClusterEnvironment), asked
/// once at setup_environment in place of detecting it. A negative number
/// (or an empty address) fails setup with `DDP_E_INVALID_ARGUMENT` naming it.
pub trait ClusterEnvironment: Send + Sync {
    /// Processes in the job.
    fn world_size(&self) -> i32;
    /// This process's rank in the job.
    fn global_rank(&self) -> i32;
    /// This process's rank on its node.
    fn local_rank(&self) -> i32;
    /// Processes on this node.
    fn local_world_size(&self) -> i32;
    /// This node's index.
    fn node_rank(&self) -> i32;
    /// The rendezvous store's host (MASTER_ADDR).
    fn main_address(&self) -> String;
    /// The rendezvous store's port (MASTER_PORT).
    fn main_port(&self) -> i32;
}

/// What a strategy made with callbacks keeps for as long as it lives.
#[derive(Default)]
pub(crate) struct Callbacks {
    io: Option<Box<Arc<dyn CheckpointIo>>>,
    env: Option<Box<EnvState>>,
}

struct EnvState {
    env: Arc<dyn ClusterEnvironment>,
    address: Mutex<CString>, // main_address's value, which the C API copies at once
}

/// `f` on the object behind `user` (a `T` the strategy keeps), with a panic turned into `failed`.
unsafe fn guarded<T, R>(user: *mut c_void, failed: R, f: impl FnOnce(&T) -> R) -> R {
    let object = &*(user as *const T);
    catch_unwind(AssertUnwindSafe(|| f(object))).unwrap_or(failed)
}

unsafe fn text<'a>(path: *const c_char) -> &'a str {
    CStr::from_ptr(path).to_str().unwrap_or("")
}

unsafe extern "C" fn io_save(user: *mut c_void, path: *const c_char, data: *const c_void, len: usize) -> c_int {
    let bytes = if len == 0 { &[][..] } else { std::slice::from_raw_parts(data as *const u8, len) };
    guarded::<Arc<dyn CheckpointIo>, c_int>(user, 1, |io| io.save(text(path), bytes).is_err() as c_int)
}

unsafe extern "C" fn io_load(user: *mut c_void, path: *const c_char, sink: *mut sys::ddp_byte_sink) -> c_int {
    guarded::<Arc<dyn CheckpointIo>, c_int>(user, 1, |io| match io.load(text(path)) {
        Ok(bytes) => (sys::ddp_byte_sink_write(sink, bytes.as_ptr() as *const c_void, bytes.len()) != sys::DDP_OK) as c_int,
        Err(_) => 1,
    })
}

unsafe extern "C" fn io_remove(user: *mut c_void, path: *const c_char) -> c_int {
    guarded::<Arc<dyn CheckpointIo>, c_int>(user, 1, |io| io.remove(text(path)).is_err() as c_int)
}

macro_rules! env_int {
    ($name:ident) => {
        unsafe extern "C" fn $name(user: *mut c_void) -> c_int {
            guarded::<EnvState, c_int>(user, -1, |e| e.env.$name())
        }
    };
}
env_int!(world_size);
env_int!(global_rank);
env_int!(local_rank);
env_int!(local_world_size);
env_int!(node_rank);
env_int!(main_port);

unsafe extern "C" fn main_address(user: *mut c_void) -> *const c_char {
    guarded::<EnvState, *const c_char>(user, ptr::null(), |e| {
        let Ok(address) = CString::new(e.env.main_address()) else { return ptr::null() };
        let mut kept = e.address.lock().unwrap_or_else(|p| p.into_inner());
        *kept = address;
        kept.as_ptr() // valid until the next call; the C API copies it at once
    })
}

impl Callbacks {
    /// Fills `o`'s callback tables (which ddp_strategy_new copies) from the
    /// options' objects; the returned value must outlive the strategy.
    pub(crate) fn install(io: &Option<Arc<dyn CheckpointIo>>, env: &Option<Arc<dyn ClusterEnvironment>>,
                          tables: &mut (sys::ddp_checkpoint_io, sys::ddp_cluster_callbacks),
                          o: &mut sys::ddp_strategy_options) -> Callbacks {
        let mut kept = Callbacks::default();
        if let Some(io) = io {
            let boxed = Box::new(io.clone());
            tables.0 = sys::ddp_checkpoint_io {
                user_data: &*boxed as *const Arc<dyn CheckpointIo> as *mut c_void,
                save: Some(io_save),
                load: Some(io_load),
                remove: Some(io_remove),
            };
            o.checkpoint_io = &tables.0;
            kept.io = Some(boxed);
        }
        if let Some(env) = env {
            let state = Box::new(EnvState { env: env.clone(), address: Mutex::new(CString::default()) });
            tables.1 = sys::ddp_cluster_callbacks {
                user_data: &*state as *const EnvState as *mut c_void,
                world_size: Some(world_size),
                global_rank: Some(global_rank),
                local_rank: Some(local_rank),
                local_world_size: Some(local_world_size),
                node_rank: Some(node_rank),
                main_address: Some(main_address),
                main_port: Some(main_port),
            };
            o.cluster_callbacks = &tables.1;
            kept.env = Some(state);
        }
        kept
    }
}
