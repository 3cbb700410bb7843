//! llama.cpp's C API, loaded at run time from the libraries [`super::libs`] wrote out,
//! behind a few owning types.
//!
//! The engine links nothing of llama.cpp: it opens `libggml-base`, `libggml` and
//! `libllama` itself (so keel starts on a machine where they could not load, and the CPU
//! kernels can be chosen before anything runs), and calls the functions through pointers
//! typed by `llama-cpp-sys-2`'s bindings of the very headers those libraries were built
//! from. Every `unsafe` block below is such a call; the types keep the C API's rules:
//! a context never outlives its model, a sampler that reads the vocabulary never
//! outlives it, a batch is never written past its capacity, logits are read only for a
//! position the last decode computed.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_void};
use std::io::Write;
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
use llama_cpp_sys_2 as sys;

use super::error::{EngineError, EngineErrorKind};

/// A token id.
pub(crate) type Token = sys::llama_token;

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The functions the engine calls, resolved once.
        pub(crate) struct Api {
            $($name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Api {
            fn resolve(library: &Library) -> Result<Api, EngineError> {
                Ok(Api {
                    $($name: {
                        let name = concat!(stringify!($name), "\0").as_bytes();
                        // SAFETY: the symbol has this signature: it is bindgen's, from
                        // the headers the library was built from.
                        let symbol = unsafe { library.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(name) };
                        *symbol.map_err(|e| EngineError::new(
                            EngineErrorKind::Load,
                            format!("llama.cpp has no {}: {e}", stringify!($name)),
                        ))?
                    },)*
                })
            }
        }
    };
}

api! {
    llama_backend_init: fn();
    llama_log_set: fn(sys::ggml_log_callback, *mut c_void);
    ggml_log_set: fn(sys::ggml_log_callback, *mut c_void);
    ggml_backend_load: fn(*const c_char) -> sys::ggml_backend_reg_t;
    ggml_backend_unload: fn(sys::ggml_backend_reg_t);
    ggml_backend_reg_get_proc_address: fn(sys::ggml_backend_reg_t, *const c_char) -> *mut c_void;
    llama_model_default_params: fn() -> sys::llama_model_params;
    llama_model_load_from_file: fn(*const c_char, sys::llama_model_params) -> *mut sys::llama_model;
    llama_model_free: fn(*mut sys::llama_model);
    llama_model_get_vocab: fn(*const sys::llama_model) -> *const sys::llama_vocab;
    llama_model_n_ctx_train: fn(*const sys::llama_model) -> i32;
    llama_context_default_params: fn() -> sys::llama_context_params;
    llama_init_from_model: fn(*mut sys::llama_model, sys::llama_context_params) -> *mut sys::llama_context;
    llama_free: fn(*mut sys::llama_context);
    llama_n_ctx: fn(*const sys::llama_context) -> u32;
    llama_tokenize: fn(*const sys::llama_vocab, *const c_char, i32, *mut Token, i32, bool, bool) -> i32;
    llama_token_to_piece: fn(*const sys::llama_vocab, Token, *mut c_char, i32, i32, bool) -> i32;
    llama_vocab_bos: fn(*const sys::llama_vocab) -> Token;
    llama_vocab_eos: fn(*const sys::llama_vocab) -> Token;
    llama_vocab_is_eog: fn(*const sys::llama_vocab, Token) -> bool;
    llama_vocab_get_add_bos: fn(*const sys::llama_vocab) -> bool;
    llama_vocab_n_tokens: fn(*const sys::llama_vocab) -> i32;
    llama_batch_init: fn(i32, i32, i32) -> sys::llama_batch;
    llama_batch_free: fn(sys::llama_batch);
    llama_decode: fn(*mut sys::llama_context, sys::llama_batch) -> i32;
    llama_get_logits_ith: fn(*mut sys::llama_context, i32) -> *mut f32;
    llama_get_memory: fn(*const sys::llama_context) -> sys::llama_memory_t;
    llama_memory_clear: fn(sys::llama_memory_t, bool);
    llama_memory_seq_rm: fn(sys::llama_memory_t, sys::llama_seq_id, sys::llama_pos, sys::llama_pos) -> bool;
    llama_state_load_file: fn(*mut sys::llama_context, *const c_char, *mut Token, usize, *mut usize) -> bool;
    llama_state_save_file: fn(*mut sys::llama_context, *const c_char, *const Token, usize) -> bool;
    llama_sampler_chain_default_params: fn() -> sys::llama_sampler_chain_params;
    llama_sampler_chain_init: fn(sys::llama_sampler_chain_params) -> *mut sys::llama_sampler;
    llama_sampler_chain_add: fn(*mut sys::llama_sampler, *mut sys::llama_sampler);
    llama_sampler_init_greedy: fn() -> *mut sys::llama_sampler;
    llama_sampler_init_top_k: fn(i32) -> *mut sys::llama_sampler;
    llama_sampler_init_top_p: fn(f32, usize) -> *mut sys::llama_sampler;
    llama_sampler_init_min_p: fn(f32, usize) -> *mut sys::llama_sampler;
    llama_sampler_init_temp: fn(f32) -> *mut sys::llama_sampler;
    llama_sampler_init_dist: fn(u32) -> *mut sys::llama_sampler;
    llama_sampler_init_grammar: fn(*const sys::llama_vocab, *const c_char, *const c_char) -> *mut sys::llama_sampler;
    llama_sampler_apply: fn(*mut sys::llama_sampler, *mut sys::llama_token_data_array);
    llama_sampler_accept: fn(*mut sys::llama_sampler, Token);
    llama_sampler_sample: fn(*mut sys::llama_sampler, *mut sys::llama_context, i32) -> Token;
    llama_sampler_free: fn(*mut sys::llama_sampler);
}

static API: OnceLock<Api> = OnceLock::new();

/// `path` for C (`None` when it holds a NUL byte).
fn c_string(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// `path` for C; a NUL byte in it is an error of `kind`.
fn c_path(path: &Path, kind: EngineErrorKind) -> Result<CString, EngineError> {
    c_string(path).ok_or_else(|| EngineError::new(kind, format!("{} has a NUL byte", path.display())))
}

/// A library that could not be loaded or lacks a function.
fn unloadable(message: String) -> EngineError {
    EngineError::new(EngineErrorKind::Load, message)
}

/// Opens the core libraries in `dir` (in dependency order, each visible to the ones
/// after it), resolves the API and routes llama.cpp's warnings and errors to stderr.
/// They stay loaded for the life of the process.
pub(crate) fn open(dir: &Path, core: &[&str]) -> Result<&'static Api, EngineError> {
    if let Some(api) = API.get() {
        return Ok(api);
    }
    let mut last = None;
    for name in core {
        let path = dir.join(name);
        // SAFETY: loading runs the library's initializers; these are llama.cpp's own
        // libraries, written by this build.
        let library = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| unloadable(format!("cannot load {}: {e}", path.display())))?;
        if let Some(previous) = last.replace(library) {
            std::mem::forget(previous);
        }
    }
    let Some(library) = last else { return Err(unloadable("no llama.cpp library to load".into())) };
    let api = Api::resolve(&library)?;
    std::mem::forget(library);
    // SAFETY: the callback is a plain function that only writes to stderr.
    unsafe {
        (api.llama_log_set)(Some(log_to_stderr), std::ptr::null_mut());
        (api.ggml_log_set)(Some(log_to_stderr), std::ptr::null_mut());
    }
    Ok(API.get_or_init(|| api))
}

/// The last level logged, for continuation lines.
static LAST_LEVEL: AtomicU32 = AtomicU32::new(0);

/// llama.cpp's warnings and errors go to stderr (keel keeps the last lines for a crash
/// report); its chatter does not.
unsafe extern "C" fn log_to_stderr(level: sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    let level = if level == sys::GGML_LOG_LEVEL_CONT { LAST_LEVEL.load(Ordering::Relaxed) } else { level };
    LAST_LEVEL.store(level, Ordering::Relaxed);
    if level < sys::GGML_LOG_LEVEL_WARN || text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string valid during the call.
    let text = unsafe { CStr::from_ptr(text) };
    let _ = std::io::stderr().write_all(text.to_bytes());
}

/// llama.cpp's own score of a CPU kernel module on this CPU (0: it cannot run here),
/// read without registering it.
pub(crate) fn score(path: &Path) -> Result<i32, EngineError> {
    // SAFETY: a kernel module of this build; its initializers only set up ggml state.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| unloadable(format!("cannot load {}: {e}", path.display())))?;
    // SAFETY: every kernel module exports `int ggml_backend_score(void)`.
    let score = unsafe { library.get::<unsafe extern "C" fn() -> i32>(b"ggml_backend_score\0") }
        .map(|score| unsafe { score() })
        .map_err(|e| unloadable(format!("{} has no score: {e}", path.display())))?;
    drop(library);
    Ok(score)
}

/// A CPU kernel module registered with ggml.
pub(crate) struct Backend {
    api: &'static Api,
    reg: NonNull<sys::ggml_backend_reg>,
}

impl Backend {
    /// Registers the module at `path`; `None` when ggml refuses it (this CPU cannot run
    /// it).
    pub(crate) fn load(api: &'static Api, path: &Path) -> Result<Option<Backend>, EngineError> {
        let path = c_path(path, EngineErrorKind::Load)?;
        // SAFETY: a valid path string; ggml returns null on failure.
        let reg = unsafe { (api.ggml_backend_load)(path.as_ptr()) };
        Ok(NonNull::new(reg).map(|reg| Backend { api, reg }))
    }

    /// What the module was compiled for (`AVX2`, `AVX512`, `AMX_INT8`, …), as ggml reports it.
    pub(crate) fn features(&self) -> Vec<String> {
        // SAFETY: a registered backend; the name is a NUL-terminated literal.
        let address = unsafe {
            (self.api.ggml_backend_reg_get_proc_address)(
                self.reg.as_ptr(),
                c"ggml_backend_get_features".as_ptr(),
            )
        };
        if address.is_null() {
            return Vec::new();
        }
        // SAFETY: ggml documents this entry point as `ggml_backend_get_features_t`.
        let get: unsafe extern "C" fn(sys::ggml_backend_reg_t) -> *mut sys::ggml_backend_feature =
            unsafe { std::mem::transmute(address) };
        // SAFETY: the list ends with a null name; its strings live as long as the module.
        let mut feature = unsafe { get(self.reg.as_ptr()) };
        let mut names = Vec::new();
        while !feature.is_null() {
            let entry = unsafe { &*feature };
            if entry.name.is_null() {
                break;
            }
            let name = unsafe { CStr::from_ptr(entry.name) }.to_string_lossy().into_owned();
            let value = if entry.value.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(entry.value) }.to_string_lossy().into_owned()
            };
            if value == "1" {
                names.push(name);
            }
            feature = unsafe { feature.add(1) };
        }
        names
    }

    /// Unregisters the module.
    pub(crate) fn unload(self) {
        // SAFETY: registered by `load`, used by nothing yet.
        unsafe { (self.api.ggml_backend_unload)(self.reg.as_ptr()) }
    }
}

/// Initializes llama.cpp (after the CPU kernels are registered).
pub(crate) fn init(api: &'static Api) {
    // SAFETY: no arguments; called once before any model is loaded.
    unsafe { (api.llama_backend_init)() }
}

/// Loaded weights.
pub(crate) struct Model {
    api: &'static Api,
    ptr: NonNull<sys::llama_model>,
}

impl Model {
    /// Loads `path`, repacking weights for the faster kernels when `repack`.
    pub(crate) fn load(api: &'static Api, path: &Path, repack: bool) -> Result<Model, EngineError> {
        let c = c_path(path, EngineErrorKind::Model)?;
        // SAFETY: default parameters, then plain fields set; a valid path string.
        let ptr = unsafe {
            let mut params = (api.llama_model_default_params)();
            params.n_gpu_layers = 0;
            params.use_extra_bufts = repack;
            (api.llama_model_load_from_file)(c.as_ptr(), params)
        };
        NonNull::new(ptr).map(|ptr| Model { api, ptr }).ok_or_else(|| {
            EngineError::new(EngineErrorKind::Model, format!("llama.cpp could not load {}", path.display()))
        })
    }

    /// The context size the model was trained for.
    pub(crate) fn n_ctx_train(&self) -> u32 {
        // SAFETY: a live model.
        u32::try_from(unsafe { (self.api.llama_model_n_ctx_train)(self.ptr.as_ptr()) }).unwrap_or(0)
    }

    /// Its vocabulary.
    pub(crate) fn vocab(&self) -> Vocab<'_> {
        // SAFETY: a live model; the vocabulary lives as long as it.
        let ptr = unsafe { (self.api.llama_model_get_vocab)(self.ptr.as_ptr()) };
        Vocab { api: self.api, ptr, _model: PhantomData }
    }

    /// A context of `n_ctx` tokens evaluating `n_batch` at a time on `threads` threads.
    pub(crate) fn context(&self, n_ctx: u32, n_batch: u32, threads: i32) -> Result<Context<'_>, EngineError> {
        // SAFETY: default parameters with plain fields set; a live model.
        let ptr = unsafe {
            let mut params = (self.api.llama_context_default_params)();
            params.n_ctx = n_ctx;
            params.n_batch = n_batch;
            params.n_threads = threads;
            params.n_threads_batch = threads;
            (self.api.llama_init_from_model)(self.ptr.as_ptr(), params)
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            EngineError::new(
                EngineErrorKind::Model,
                format!("llama.cpp could not create a context of {n_ctx} tokens"),
            )
        })?;
        let n_vocab = usize::try_from(self.vocab().n_tokens()).unwrap_or(0);
        Ok(Context { api: self.api, ptr, n_vocab, _model: PhantomData })
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: every context and sampler borrowing it is gone (lifetimes).
        unsafe { (self.api.llama_model_free)(self.ptr.as_ptr()) }
    }
}

/// A model's vocabulary.
#[derive(Clone, Copy)]
pub(crate) struct Vocab<'m> {
    api: &'static Api,
    ptr: *const sys::llama_vocab,
    _model: PhantomData<&'m Model>,
}

impl Vocab<'_> {
    /// The tokens of `text`, special tokens (`<|im_start|>`) read as such.
    pub(crate) fn tokenize(&self, text: &str, add_bos: bool) -> Vec<Token> {
        let Ok(len) = i32::try_from(text.len()) else { return Vec::new() };
        let mut tokens: Vec<Token> = vec![0; text.len() + 2];
        for _ in 0..2 {
            let capacity = i32::try_from(tokens.len()).unwrap_or(i32::MAX);
            // SAFETY: `text` and `tokens` are valid for the lengths given.
            let n = unsafe {
                (self.api.llama_tokenize)(
                    self.ptr,
                    text.as_ptr().cast(),
                    len,
                    tokens.as_mut_ptr(),
                    capacity,
                    add_bos,
                    true,
                )
            };
            if n >= 0 {
                tokens.truncate(n as usize);
                return tokens;
            }
            tokens.resize(n.unsigned_abs() as usize, 0);
        }
        Vec::new()
    }

    /// The bytes of `token`, special tokens included.
    pub(crate) fn piece(&self, token: Token) -> Vec<u8> {
        let mut buffer = vec![0u8; 32];
        for _ in 0..2 {
            let capacity = i32::try_from(buffer.len()).unwrap_or(i32::MAX);
            // SAFETY: the buffer is valid for its length.
            let n = unsafe {
                (self.api.llama_token_to_piece)(
                    self.ptr,
                    token,
                    buffer.as_mut_ptr().cast(),
                    capacity,
                    0,
                    true,
                )
            };
            if n >= 0 {
                buffer.truncate(n as usize);
                return buffer;
            }
            buffer.resize(n.unsigned_abs() as usize, 0);
        }
        Vec::new()
    }

    /// The beginning-of-sequence token.
    pub(crate) fn bos(&self) -> Token {
        // SAFETY: a live vocabulary.
        unsafe { (self.api.llama_vocab_bos)(self.ptr) }
    }

    /// The end-of-sequence token.
    pub(crate) fn eos(&self) -> Token {
        // SAFETY: a live vocabulary.
        unsafe { (self.api.llama_vocab_eos)(self.ptr) }
    }

    /// Whether `token` ends generation.
    pub(crate) fn is_eog(&self, token: Token) -> bool {
        // SAFETY: a live vocabulary.
        unsafe { (self.api.llama_vocab_is_eog)(self.ptr, token) }
    }

    /// Whether prompts start with the beginning-of-sequence token.
    pub(crate) fn add_bos(&self) -> bool {
        // SAFETY: a live vocabulary.
        unsafe { (self.api.llama_vocab_get_add_bos)(self.ptr) }
    }

    /// How many tokens there are.
    pub(crate) fn n_tokens(&self) -> i32 {
        // SAFETY: a live vocabulary.
        unsafe { (self.api.llama_vocab_n_tokens)(self.ptr) }
    }
}

/// An inference context: the KV cache and the logits of the last decode.
pub(crate) struct Context<'m> {
    api: &'static Api,
    ptr: NonNull<sys::llama_context>,
    n_vocab: usize,
    _model: PhantomData<&'m Model>,
}

impl Context<'_> {
    /// The context size it got.
    pub(crate) fn n_ctx(&self) -> u32 {
        // SAFETY: a live context.
        unsafe { (self.api.llama_n_ctx)(self.ptr.as_ptr()) }
    }

    /// Evaluates `batch`; llama.cpp's status code on failure.
    pub(crate) fn decode(&mut self, batch: &Batch) -> Result<(), i32> {
        // SAFETY: a live context; the batch's arrays hold `n_tokens` filled entries.
        match unsafe { (self.api.llama_decode)(self.ptr.as_ptr(), batch.raw) } {
            0 => Ok(()),
            code => Err(code),
        }
    }

    /// The candidates after position `index` of the last batch (one that asked for
    /// logits); `None` when llama.cpp has none there.
    pub(crate) fn candidates(&mut self, index: i32) -> Option<Candidates> {
        // SAFETY: a live context; llama.cpp returns null for a position without logits,
        // else `n_vocab` floats valid until the next decode (copied out at once).
        let logits = unsafe { (self.api.llama_get_logits_ith)(self.ptr.as_ptr(), index) };
        if logits.is_null() || self.n_vocab == 0 {
            return None;
        }
        let logits = unsafe { std::slice::from_raw_parts(logits, self.n_vocab) };
        let data = logits
            .iter()
            .enumerate()
            .map(|(id, &logit)| sys::llama_token_data { id: id as Token, logit, p: 0.0 })
            .collect();
        Some(Candidates { data, selected: -1, sorted: false })
    }

    /// Forgets every cached token.
    pub(crate) fn clear(&mut self) {
        // SAFETY: a live context and its memory.
        unsafe {
            let memory = (self.api.llama_get_memory)(self.ptr.as_ptr());
            (self.api.llama_memory_clear)(memory, true);
        }
    }

    /// Forgets the cached tokens from position `keep` on.
    pub(crate) fn truncate(&mut self, keep: u32) {
        let keep = i32::try_from(keep).unwrap_or(i32::MAX);
        // SAFETY: a live context and its memory; sequence 0, positions keep..end.
        unsafe {
            let memory = (self.api.llama_get_memory)(self.ptr.as_ptr());
            (self.api.llama_memory_seq_rm)(memory, 0, keep, -1);
        }
    }

    /// Writes the state (KV cache) for `tokens` to `path`.
    pub(crate) fn save_state(&mut self, path: &Path, tokens: &[Token]) -> bool {
        let Some(c) = c_string(path) else { return false };
        // SAFETY: a live context; the tokens are valid for their length.
        unsafe {
            (self.api.llama_state_save_file)(self.ptr.as_ptr(), c.as_ptr(), tokens.as_ptr(), tokens.len())
        }
    }

    /// Reads a state written by [`Context::save_state`]: its tokens, or `None` when it
    /// does not load (then the context holds nothing).
    pub(crate) fn load_state(&mut self, path: &Path) -> Option<Vec<Token>> {
        let c = c_string(path)?;
        let mut tokens: Vec<Token> = vec![0; self.n_ctx() as usize];
        let mut count = 0usize;
        // SAFETY: a live context; the token buffer is valid for its length.
        let loaded = unsafe {
            (self.api.llama_state_load_file)(
                self.ptr.as_ptr(),
                c.as_ptr(),
                tokens.as_mut_ptr(),
                tokens.len(),
                &mut count,
            )
        };
        if !loaded || count > tokens.len() {
            self.clear();
            return None;
        }
        tokens.truncate(count);
        Some(tokens)
    }

    fn raw(&mut self) -> *mut sys::llama_context {
        self.ptr.as_ptr()
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: a live context, freed once.
        unsafe { (self.api.llama_free)(self.ptr.as_ptr()) }
    }
}

/// Tokens to evaluate, with their positions.
pub(crate) struct Batch {
    api: &'static Api,
    raw: sys::llama_batch,
    capacity: usize,
}

impl Batch {
    /// Room for `capacity` tokens of one sequence.
    pub(crate) fn new(api: &'static Api, capacity: usize) -> Batch {
        let n = i32::try_from(capacity).unwrap_or(i32::MAX);
        // SAFETY: allocates arrays for `n` tokens of 1 sequence each.
        let raw = unsafe { (api.llama_batch_init)(n, 0, 1) };
        Batch { api, raw, capacity }
    }

    /// Empties it.
    pub(crate) fn clear(&mut self) {
        self.raw.n_tokens = 0;
    }

    /// How many tokens it holds.
    pub(crate) fn len(&self) -> i32 {
        self.raw.n_tokens
    }

    /// Appends `token` at `position` of sequence 0; `logits` asks for the logits after
    /// it. False when full.
    pub(crate) fn add(&mut self, token: Token, position: usize, logits: bool) -> bool {
        let n = self.raw.n_tokens as usize;
        let Ok(position) = i32::try_from(position) else { return false };
        if n >= self.capacity || self.raw.token.is_null() {
            return false;
        }
        // SAFETY: `n` is below the capacity the arrays were allocated for, and each
        // `seq_id[n]` points to room for one sequence id.
        unsafe {
            *self.raw.token.add(n) = token;
            *self.raw.pos.add(n) = position;
            *self.raw.n_seq_id.add(n) = 1;
            *(*self.raw.seq_id.add(n)) = 0;
            *self.raw.logits.add(n) = i8::from(logits);
        }
        self.raw.n_tokens += 1;
        true
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: allocated by `llama_batch_init`, freed once.
        unsafe { (self.api.llama_batch_free)(self.raw) }
    }
}

/// Candidate tokens with their logits, as samplers see them.
pub(crate) struct Candidates {
    data: Vec<sys::llama_token_data>,
    selected: i64,
    sorted: bool,
}

impl Candidates {
    /// Whether every candidate is ruled out (logit −∞).
    pub(crate) fn all_ruled_out(&self) -> bool {
        self.data.iter().all(|d| d.logit == f32::NEG_INFINITY)
    }

    /// Drops the ruled-out candidates and any selection.
    pub(crate) fn drop_ruled_out(&mut self) {
        self.data.retain(|d| d.logit != f32::NEG_INFINITY);
        self.selected = -1;
    }

    /// The token a sampler selected.
    pub(crate) fn selected(&self) -> Option<Token> {
        usize::try_from(self.selected).ok().and_then(|i| self.data.get(i)).map(|d| d.id)
    }
}

/// A llama.cpp sampler; `'v` is the vocabulary a grammar sampler reads.
pub(crate) struct Sampler<'v> {
    api: &'static Api,
    ptr: NonNull<sys::llama_sampler>,
    _vocab: PhantomData<Vocab<'v>>,
}

impl<'v> Sampler<'v> {
    fn wrap(api: &'static Api, ptr: *mut sys::llama_sampler) -> Option<Sampler<'v>> {
        NonNull::new(ptr).map(|ptr| Sampler { api, ptr, _vocab: PhantomData })
    }

    /// The most likely token.
    pub(crate) fn greedy(api: &'static Api) -> Option<Sampler<'v>> {
        // SAFETY: no arguments.
        Self::wrap(api, unsafe { (api.llama_sampler_init_greedy)() })
    }

    /// `top_k → top_p → min_p → temperature → random pick`, each stage optional.
    pub(crate) fn chain(api: &'static Api, stages: &[Stage]) -> Option<Sampler<'v>> {
        // SAFETY: default parameters; each stage's sampler is handed to the chain, which
        // owns and frees it.
        unsafe {
            let chain =
                Self::wrap(api, (api.llama_sampler_chain_init)((api.llama_sampler_chain_default_params)()))?;
            for stage in stages {
                let sampler = match *stage {
                    Stage::TopK(k) => (api.llama_sampler_init_top_k)(k),
                    Stage::TopP(p) => (api.llama_sampler_init_top_p)(p, 1),
                    Stage::MinP(p) => (api.llama_sampler_init_min_p)(p, 1),
                    Stage::Temperature(t) => (api.llama_sampler_init_temp)(t),
                    Stage::Pick(seed) => (api.llama_sampler_init_dist)(seed),
                };
                if sampler.is_null() {
                    return None;
                }
                (api.llama_sampler_chain_add)(chain.ptr.as_ptr(), sampler);
            }
            Some(chain)
        }
    }

    /// Keeps only tokens that continue a text valid under `grammar` (GBNF, rule `root`);
    /// `None` when llama.cpp rejects the grammar.
    pub(crate) fn grammar(api: &'static Api, vocab: Vocab<'v>, grammar: &str) -> Option<Sampler<'v>> {
        let text = CString::new(grammar).ok()?;
        // SAFETY: a live vocabulary (it outlives the sampler: `'v`) and valid strings.
        Self::wrap(api, unsafe {
            (api.llama_sampler_init_grammar)(vocab.ptr, text.as_ptr(), c"root".as_ptr())
        })
    }

    /// Applies the sampler to `candidates` (ruling tokens out, or selecting one).
    pub(crate) fn apply(&mut self, candidates: &mut Candidates) {
        let mut array = sys::llama_token_data_array {
            data: candidates.data.as_mut_ptr(),
            size: candidates.data.len(),
            selected: candidates.selected,
            sorted: candidates.sorted,
        };
        // SAFETY: the array describes the vector's own buffer; samplers shrink `size`,
        // reorder in place and set `selected`, never writing past `size`.
        unsafe { (self.api.llama_sampler_apply)(self.ptr.as_ptr(), &mut array) };
        if array.data == candidates.data.as_mut_ptr() {
            candidates.data.truncate(array.size.min(candidates.data.len()));
        } else if !array.data.is_null() {
            // A sampler that moved the data to its own buffer: copy it back.
            // SAFETY: the sampler's buffer holds `size` entries until its next call.
            candidates.data = unsafe { std::slice::from_raw_parts(array.data, array.size) }.to_vec();
        }
        candidates.selected = array.selected;
        candidates.sorted = array.sorted;
    }

    /// Tells the sampler `token` was chosen (grammars advance).
    pub(crate) fn accept(&mut self, token: Token) {
        // SAFETY: a live sampler.
        unsafe { (self.api.llama_sampler_accept)(self.ptr.as_ptr(), token) }
    }

    /// Samples (and accepts) the next token from the logits at `index`.
    pub(crate) fn sample(&mut self, context: &mut Context<'_>, index: i32) -> Token {
        // SAFETY: a live sampler and context; `index` asked for logits.
        unsafe { (self.api.llama_sampler_sample)(self.ptr.as_ptr(), context.raw(), index) }
    }
}

impl Drop for Sampler<'_> {
    fn drop(&mut self) {
        // SAFETY: owned (stages added to a chain are owned by the chain, not by us).
        unsafe { (self.api.llama_sampler_free)(self.ptr.as_ptr()) }
    }
}

/// One stage of a sampler chain.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stage {
    /// Keep the `k` most likely.
    TopK(i32),
    /// Keep the most likely up to probability `p`.
    TopP(f32),
    /// Drop those below `p` times the most likely.
    MinP(f32),
    /// Scale the logits.
    Temperature(f32),
    /// Pick one at random (seeded).
    Pick(u32),
}
