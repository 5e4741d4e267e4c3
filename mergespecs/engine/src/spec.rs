//! Merge specs as the engine holds them: upload validation, the compile cache key (SHA-256
//! of the bytes), and native specs.

use std::fmt;
use std::sync::Arc;

use concast_sdk::{abi, MergeSpec};
use wasmtime::{ExternType, FuncType, Module, ValType};

use crate::config::Limits;
use crate::fault::Fault;
use crate::host::{FlowCtx, FlowInfo, Phase};
use crate::native::{Factory, NativeFactory};
use crate::sandbox::WasmSpec;

/// Why a module was refused at upload. Each message names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    TooLarge {
        size: usize,
        limit: usize,
    },
    NotWasm(String),
    ForbiddenImport {
        module: String,
        name: String,
        why: String,
    },
    MissingExport {
        name: &'static str,
        signature: &'static str,
    },
    WrongExportType {
        name: String,
        expected: &'static str,
        found: String,
    },
    MemoryTooLarge {
        min_bytes: u64,
        limit: usize,
    },
    AbiVersion {
        found: String,
    },
    Instantiation(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::TooLarge { size, limit } => {
                write!(f, "module is {size} bytes; the limit is {limit}")
            }
            SpecError::NotWasm(err) => write!(f, "not a valid WebAssembly module: {err}"),
            SpecError::ForbiddenImport { module, name, why } => {
                write!(f, "imports `{module}`.`{name}`: {why}")
            }
            SpecError::MissingExport { name, signature } => {
                let version = if abi::REQUIRED_EXPORTS_V2.iter().any(|(n, _)| n == name) {
                    abi::VERSION_2
                } else {
                    abi::VERSION_1
                };
                write!(
                    f,
                    "missing export `{name}` {signature} (required by concast ABI v{version})"
                )
            }
            SpecError::WrongExportType {
                name,
                expected,
                found,
            } => {
                write!(
                    f,
                    "export `{name}` has type {found}; the ABI requires {expected}"
                )
            }
            SpecError::MemoryTooLarge { min_bytes, limit } => {
                write!(
                    f,
                    "initial linear memory is {min_bytes} bytes; the per-flow limit is {limit}"
                )
            }
            SpecError::AbiVersion { found } => {
                let versions: Vec<String> =
                    abi::SUPPORTED_VERSIONS.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "concast_abi_version {found}; this engine supports ABI versions {}",
                    versions.join(" and ")
                )
            }
            SpecError::Instantiation(err) => write!(f, "could not be instantiated: {err}"),
        }
    }
}

impl std::error::Error for SpecError {}

/// What validation learned about a module (printed by `concast-spec check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecInfo {
    /// "wasm" or "native:<type name>".
    pub kind: String,
    /// SHA-256 of the module bytes (zero for native specs).
    pub sha256: [u8; 32],
    pub size: usize,
    pub abi_version: u32,
    /// Exports as `name signature`.
    pub exports: Vec<String>,
    /// Imports as `module.name signature`.
    pub imports: Vec<String>,
    /// Initial linear memory in bytes.
    pub memory_min_bytes: u64,
    /// Flow parameters embedded by the receiver (custom section `concast.params`); used by
    /// flows that are given none of their own.
    pub params: Vec<u8>,
}

impl SpecInfo {
    pub fn sha256_hex(&self) -> String {
        concast_wire::hex(&self.sha256)
    }
}


pub(crate) enum SpecKind {
    Wasm(WasmSpec),
    Native(Box<dyn NativeFactory>),
}

pub(crate) struct SpecInner {
    pub info: SpecInfo,
    pub kind: SpecKind,
}

/// A merge spec the engine can run flows with: cheap to clone, shared by every flow using it.
#[derive(Clone)]
pub struct SpecRef(pub(crate) Arc<SpecInner>);

impl SpecRef {
    /// `S` run natively (no sandbox: for trusted specs and as the benchmark peer), one call
    /// per step and datagram as ABI version 1.
    pub fn native<S>() -> SpecRef
    where
        S: MergeSpec + Send + 'static,
        S::State: Send,
    {
        Self::native_as::<S>(false)
    }

    /// `S` run natively as ABI version 2 runs a `.wasm` build: batches laid out in a batch
    /// area and worked through by the SDK's run loop (`concast_sdk::run`), which tags and
    /// merges with [`MergeSpec::tag_and_merge`]. The same steps as the spec's `.wasm` build,
    /// without the sandbox: the benchmark peer of a v2 module.
    pub fn native_batched<S>() -> SpecRef
    where
        S: MergeSpec + Send + 'static,
        S::State: Send,
    {
        Self::native_as::<S>(true)
    }

    fn native_as<S>(batched: bool) -> SpecRef
    where
        S: MergeSpec + Send + 'static,
        S::State: Send,
    {
        let info = SpecInfo {
            kind: format!("native:{}", std::any::type_name::<S>()),
            sha256: [0; 32],
            size: 0,
            abi_version: if batched { abi::VERSION_2 } else { abi::VERSION_1 },
            exports: Vec::new(),
            imports: Vec::new(),
            memory_min_bytes: 0,
            params: Vec::new(),
        };
        SpecRef(Arc::new(SpecInner {
            info,
            kind: SpecKind::Native(Box::new(Factory::<S>::new(batched))),
        }))
    }

    pub fn info(&self) -> &SpecInfo {
        &self.0.info
    }

    /// The same loaded spec (a cache hit returns the same one).
    pub fn same(&self, other: &SpecRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn is_wasm(&self) -> bool {
        matches!(self.0.kind, SpecKind::Wasm(_))
    }

    /// Where the compiled code of each function of a `.wasm` spec sits in this process, as
    /// `perf` map lines (`START SIZE name`, hex): written to `/tmp/perf-PID.map`, they let
    /// `perf report` name the guest's functions (named from the module's name section, or
    /// `wasm-function[N]`). Empty for a native spec.
    pub fn perf_map(&self) -> Vec<String> {
        match &self.0.kind {
            SpecKind::Wasm(spec) => spec.code_map(),
            SpecKind::Native(_) => Vec::new(),
        }
    }
}

impl fmt::Debug for SpecRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SpecRef({}, {})",
            self.0.info.kind,
            self.0.info.sha256_hex()
        )
    }
}

pub use concast_wire::csp::sha256;

/// A Wasm function type in the ABI's notation: `(i32, i64) -> i32`, `() -> ()`.
fn signature(ty: &FuncType) -> String {
    let name = |t: ValType| match t {
        ValType::I32 => "i32".to_string(),
        ValType::I64 => "i64".to_string(),
        ValType::F32 => "f32".to_string(),
        ValType::F64 => "f64".to_string(),
        ValType::V128 => "v128".to_string(),
        other => format!("{other}"),
    };
    let params: Vec<String> = ty.params().map(name).collect();
    let results: Vec<String> = ty.results().map(name).collect();
    let results = match results.len() {
        0 => "()".to_string(),
        1 => results[0].clone(),
        _ => format!("({})", results.join(", ")),
    };
    format!("({}) -> {}", params.join(", "), results)
}

/// Checks `bytes` against the ABI and compiles it: size, validity, imports, exports, memory,
/// declared ABI version (by calling `concast_abi_version` in a throwaway sandbox).
pub(crate) fn compile(
    engine: &wasmtime::Engine,
    linker: &wasmtime::Linker<FlowCtx>,
    bytes: &[u8],
    limits: &Limits,
    fallback: Option<&std::sync::Arc<crate::fallback::Fallback>>,
) -> Result<SpecInner, SpecError> {
    if bytes.len() > limits.module_bytes {
        return Err(SpecError::TooLarge {
            size: bytes.len(),
            limit: limits.module_bytes,
        });
    }
    let module =
        Module::from_binary(engine, bytes).map_err(|e| SpecError::NotWasm(format!("{e:#}")))?;

    let mut imports = Vec::new();
    for import in module.imports() {
        let forbid = |why: String| SpecError::ForbiddenImport {
            module: import.module().into(),
            name: import.name().into(),
            why,
        };
        if import.module() != abi::IMPORT_MODULE {
            return Err(forbid(format!(
                "only `{}` functions may be imported (no WASI, no clock but the engine's, no I/O)",
                abi::IMPORT_MODULE
            )));
        }
        let ExternType::Func(ty) = import.ty() else {
            return Err(forbid("only functions may be imported".into()));
        };
        let found = signature(&ty);
        match abi::IMPORTS.iter().find(|(name, _)| *name == import.name()) {
            None => {
                let known: Vec<&str> = abi::IMPORTS.iter().map(|(n, _)| *n).collect();
                return Err(forbid(format!(
                    "ABI v{} has no such import (it has: {})",
                    abi::VERSION_1,
                    known.join(", ")
                )));
            }
            Some((_, expected)) if *expected != found => {
                return Err(forbid(format!(
                    "declared as {found}, the ABI defines {expected}"
                )));
            }
            Some(_) => imports.push(format!("{}.{} {found}", import.module(), import.name())),
        }
    }

    let mut exports = Vec::new();
    let mut memory_min_bytes = None;
    for export in module.exports() {
        match export.ty() {
            ExternType::Func(ty) => exports.push(format!("{} {}", export.name(), signature(&ty))),
            ExternType::Memory(mem) if export.name() == "memory" => {
                memory_min_bytes = Some(mem.minimum().saturating_mul(mem.page_size()));
                exports.push("memory".into());
            }
            _ => {}
        }
    }
    let memory_min_bytes =
        memory_min_bytes.ok_or_else(|| match module.exports().find(|e| e.name() == "memory") {
            Some(e) => SpecError::WrongExportType {
                name: "memory".into(),
                expected: "a linear memory",
                found: format!("{:?}", e.ty()),
            },
            None => SpecError::MissingExport {
                name: "memory",
                signature: "(linear memory)",
            },
        })?;
    if memory_min_bytes > limits.memory_bytes as u64 {
        return Err(SpecError::MemoryTooLarge {
            min_bytes: memory_min_bytes,
            limit: limits.memory_bytes,
        });
    }
    // Exports of one version only are checked for their signature here and required once
    // the module has said its version.
    let required = abi::REQUIRED_EXPORTS.iter().map(|e| (e, true));
    let optional = abi::OPTIONAL_EXPORTS.iter().map(|e| (e, false));
    let versioned = abi::REQUIRED_EXPORTS_V1
        .iter()
        .chain(abi::REQUIRED_EXPORTS_V2)
        .map(|e| (e, false));
    for ((name, expected), required) in required.chain(optional).chain(versioned) {
        match module.exports().find(|e| e.name() == *name) {
            None if required => {
                return Err(SpecError::MissingExport {
                    name,
                    signature: expected,
                })
            }
            None => {}
            Some(e) => {
                let found = match e.ty() {
                    ExternType::Func(ty) => signature(&ty),
                    other => format!("{other:?}"),
                };
                if found != *expected {
                    return Err(SpecError::WrongExportType {
                        name: name.to_string(),
                        expected,
                        found,
                    });
                }
            }
        }
    }

    let mut spec = WasmSpec::new(
        linker
            .instantiate_pre(&module)
            .map_err(|e| SpecError::Instantiation(format!("{e:#}")))?,
    );
    if let Some(fallback) = fallback {
        spec.overflow_into(fallback.clone(), bytes);
    }
    let abi_version = declared_abi_version(&spec, limits)?;
    let needed = if abi_version == abi::VERSION_2 {
        abi::REQUIRED_EXPORTS_V2
    } else {
        abi::REQUIRED_EXPORTS_V1
    };
    for (name, signature) in needed {
        if module.exports().all(|e| e.name() != *name) {
            return Err(SpecError::MissingExport { name, signature });
        }
    }
    spec.version = abi_version;
    let info = SpecInfo {
        kind: "wasm".into(),
        sha256: sha256(bytes),
        size: bytes.len(),
        abi_version,
        exports,
        imports,
        memory_min_bytes,
        params: crate::params_section::embedded(bytes).unwrap_or_default(),
    };
    Ok(SpecInner {
        info,
        kind: SpecKind::Wasm(spec),
    })
}

/// Calls `concast_abi_version` in a throwaway sandbox with the flow limits.
fn declared_abi_version(spec: &WasmSpec, limits: &Limits) -> Result<u32, SpecError> {
    let info = FlowInfo {
        receiver: 0,
        group: 0,
        node: 0,
        path_mtu: 0,
        children: 0,
        params: Vec::new(),
    };
    let describe = limits.cpu.describe();
    let fault = |e: wasmtime::Error| Fault::from_wasmtime(e, &describe).to_string();
    let (mut store, instance, _) = spec
        .instantiate(FlowCtx::new(info, limits, 0), limits.cpu)
        .map_err(|e| SpecError::Instantiation(fault(e)))?;
    let version = instance
        .get_typed_func::<(), i32>(&mut store, "concast_abi_version")
        .map_err(|e| SpecError::Instantiation(format!("{e:#}")))?;
    store.data_mut().begin_call(Phase::Init);
    crate::cpu::arm(&mut store, limits.cpu);
    match version.call(&mut store, ()) {
        Ok(v) if abi::SUPPORTED_VERSIONS.contains(&(v as u32)) => Ok(v as u32),
        Ok(v) => Err(SpecError::AbiVersion {
            found: format!("returns {v}"),
        }),
        Err(e) => Err(SpecError::AbiVersion {
            found: format!("failed: {}", fault(e)),
        }),
    }
}
