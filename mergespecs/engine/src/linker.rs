//! The `concast` imports as wasmtime host functions: thin wrappers that bounds-check guest
//! pointers and hand over to [`FlowCtx`], where the rules live. Nothing else is linked, so a
//! module importing anything else (WASI, say) fails validation.

use std::ops::Range;

use wasmtime::{Caller, Linker};

use crate::fault::Fault;
use crate::host::FlowCtx;

type Result<T> = wasmtime::Result<T>;

/// The flow context of an import call, the call counted (`FlowStats::host_calls`).
fn counted<'a>(caller: &'a mut Caller<'_, FlowCtx>) -> &'a mut FlowCtx {
    let cx = caller.data_mut();
    cx.host_calls += 1;
    cx
}

/// The guest's memory and the flow context, borrowed together (the call counted).
fn guest<'a>(caller: &'a mut Caller<'_, FlowCtx>) -> Result<(&'a mut [u8], &'a mut FlowCtx)> {
    let memory = counted(caller)
        .memory
        .ok_or_else(|| Fault::Abi("an import needing memory was called before init".into()))?;
    Ok(memory.data_and_store_mut(caller))
}

/// `ptr .. ptr+len` of guest memory, checked. Wasm addresses are unsigned 32-bit.
fn span(memory: &[u8], ptr: i32, len: i32, what: &str) -> Result<Range<usize>> {
    let start = ptr as u32 as usize;
    let end = start + len as u32 as usize;
    if end > memory.len() {
        return Err(Fault::Abi(format!(
            "{what}: buffer {start}+{} is outside linear memory ({} bytes)",
            len as u32,
            memory.len()
        ))
        .into());
    }
    Ok(start..end)
}

pub(crate) fn concast_linker(engine: &wasmtime::Engine) -> Result<Linker<FlowCtx>> {
    let mut l = Linker::new(engine);
    let m = concast_sdk::abi::IMPORT_MODULE;

    l.func_wrap(m, "now_us", |mut c: Caller<'_, FlowCtx>| counted(&mut c).now_us as i64)?;
    l.func_wrap(m, "flow_receiver", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).info.receiver as i32
    })?;
    l.func_wrap(m, "flow_group", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).info.group as i32
    })?;
    l.func_wrap(m, "flow_node", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).info.node as i32
    })?;
    l.func_wrap(m, "flow_mtu", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).info.path_mtu as i32
    })?;
    l.func_wrap(m, "flow_children", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).info.children as i32
    })?;
    l.func_wrap(
        m,
        "flow_params",
        |mut c: Caller<'_, FlowCtx>, ptr: i32, cap: i32| -> Result<i32> {
            let (mem, cx) = guest(&mut c)?;
            let dst = span(mem, ptr, cap, "flow_params")?;
            Ok(cx.params(&mut mem[dst]) as i32)
        },
    )?;
    l.func_wrap(
        m,
        "set_timer",
        |mut c: Caller<'_, FlowCtx>, at_us: i64| -> Result<()> {
            Ok(counted(&mut c).set_timer(at_us.max(0) as u64)?)
        },
    )?;
    l.func_wrap(
        m,
        "hold_limit",
        |mut c: Caller<'_, FlowCtx>, at_us: i64| -> Result<()> {
            Ok(counted(&mut c).hold_limit(at_us.max(0) as u64)?)
        },
    )?;
    l.func_wrap(m, "egress_free_at", |mut c: Caller<'_, FlowCtx>| {
        counted(&mut c).egress_free_at as i64
    })?;
    l.func_wrap(
        m,
        "cancel_timer",
        |mut c: Caller<'_, FlowCtx>| -> Result<()> { Ok(counted(&mut c).cancel_timer()?) },
    )?;
    l.func_wrap(
        m,
        "pending_count",
        |mut c: Caller<'_, FlowCtx>| -> Result<i32> {
            let (mem, cx) = guest(&mut c)?;
            cx.sync_run(mem);
            Ok(cx.pending_count() as i32)
        },
    )?;
    l.func_wrap(
        m,
        "pending_peek",
        |mut c: Caller<'_, FlowCtx>, index: i32, ptr: i32, cap: i32| -> Result<i32> {
            let (mem, cx) = guest(&mut c)?;
            cx.sync_run(mem);
            let dst = span(mem, ptr, cap, "pending_peek")?;
            Ok(cx.pending_peek(index, &mut mem[dst]))
        },
    )?;
    l.func_wrap(
        m,
        "pending_take",
        |mut c: Caller<'_, FlowCtx>, index: i32, ptr: i32, cap: i32| -> Result<i32> {
            let (mem, cx) = guest(&mut c)?;
            cx.sync_run(mem);
            let dst = span(mem, ptr, cap, "pending_take")?;
            let (r, taken) = cx.pending_take(index, &mut mem[dst])?;
            if let Some(i) = taken {
                cx.mark_taken(mem, i);
            }
            Ok(r)
        },
    )?;
    l.func_wrap(
        m,
        "pending_scan",
        |mut c: Caller<'_, FlowCtx>, first: i32, ptr: i32, cap: i32| -> Result<i32> {
            use concast_sdk::abi::pending::{SCAN_MAX, SCAN_RECORD_LEN};
            let (mem, cx) = guest(&mut c)?;
            cx.sync_run(mem);
            let cap = (cap.max(0) as usize).min(SCAN_MAX);
            let dst = span(mem, ptr, (cap * SCAN_RECORD_LEN) as i32, "pending_scan")?;
            let Ok(first) = usize::try_from(first) else { return Ok(0) };
            let mut records = [[0u32; 2]; SCAN_MAX];
            let n = cx.pending_scan(mem, first, &mut records[..cap]);
            for (chunk, [at, len]) in mem[dst].chunks_exact_mut(SCAN_RECORD_LEN).zip(&records[..n]) {
                chunk[..4].copy_from_slice(&at.to_le_bytes());
                chunk[4..].copy_from_slice(&len.to_le_bytes());
            }
            Ok(n as i32)
        },
    )?;
    l.func_wrap(
        m,
        "pending_take_list",
        |mut c: Caller<'_, FlowCtx>, ptr: i32, n: i32| -> Result<i32> {
            use concast_sdk::abi::pending::TAKE_LIST_MAX;
            let (mem, cx) = guest(&mut c)?;
            cx.sync_run(mem);
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if n > TAKE_LIST_MAX {
                return Err(Fault::Abi(format!("pending_take_list: {n} indices; at most {TAKE_LIST_MAX}")).into());
            }
            let src = span(mem, ptr, (n * 4) as i32, "pending_take_list")?;
            let mut indices = [0u32; TAKE_LIST_MAX];
            for (i, chunk) in indices.iter_mut().zip(mem[src].chunks_exact(4)) {
                *i = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
            }
            let mut taken = [0usize; TAKE_LIST_MAX];
            let r = cx.pending_take_list(&indices[..n], &mut taken)?;
            if r > 0 {
                for &index in &taken[..n] {
                    cx.mark_taken(mem, index);
                }
            }
            Ok(r)
        },
    )?;
    l.func_wrap(
        m,
        "emit",
        |mut c: Caller<'_, FlowCtx>,
         ptr: i32,
         len: i32,
         protocol: i32,
         ttl: i32,
         flags: i32|
         -> Result<()> {
            let (mem, cx) = guest(&mut c)?;
            let src = span(mem, ptr, len, "emit")?;
            Ok(cx.emit(&mem[src], protocol, ttl, flags)?)
        },
    )?;
    l.func_wrap(
        m,
        "log",
        |mut c: Caller<'_, FlowCtx>, level: i32, ptr: i32, len: i32| -> Result<()> {
            let (mem, cx) = guest(&mut c)?;
            let src = span(mem, ptr, len, "log")?;
            cx.log(level, &mem[src]);
            Ok(())
        },
    )?;
    l.func_wrap(
        m,
        "abort",
        |mut c: Caller<'_, FlowCtx>, ptr: i32, len: i32| -> Result<()> {
            let (mem, cx) = guest(&mut c)?;
            let src = span(mem, ptr, len, "abort")?;
            Err(cx.abort(&mem[src]).into())
        },
    )?;
    Ok(l)
}
