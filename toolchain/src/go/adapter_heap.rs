//! Memory for the WASI preview 1 adapter of a Go module.
//!
//! The adapter allocates its state and stack through the main module's
//! `cabi_realloc` on the first WASI call. The Go runtime makes that call
//! while it starts, before any Go function (a `//go:wasmexport` such as the
//! SDK's `cabi_realloc`) may run; and the other way the adapter knows,
//! `memory.grow`, hands out pages that Go's heap, which assumes it grows
//! alone, later takes too. So the Go SDK reserves an array in the module's
//! data, starting with [`HEADER`], and this module adds a bump allocator
//! over it in plain wasm, exported as `cabi_realloc_adapter`: wit-component
//! gives the adapter that one instead of `cabi_realloc`.

use std::ops::Range;

use anyhow::{Context, bail};
use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasmparser::{DataKind, Operator, Payload};

/// The start of the SDK's array (`adapterHeap` in `go-sdk/internal/abi`).
pub(super) const HEADER: &[u8] = b"gantry:wasi-adapter-heap:v1\0";
/// The array's size (`AdapterHeapSize` in the SDK).
pub(super) const SIZE: u32 = 256 << 10;
/// Where allocations start, past the header.
const SKIP: u32 = 64;
/// The name wit-component looks for.
const EXPORT: &str = "cabi_realloc_adapter";

/// Where the array is: its address in linear memory.
fn find_heap(module: &[u8]) -> anyhow::Result<u32> {
    let mut found = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let Payload::DataSection(data) = payload? else {
            continue;
        };
        for segment in data {
            let segment = segment?;
            let DataKind::Active {
                memory_index: 0,
                offset_expr,
            } = segment.kind
            else {
                continue;
            };
            let Some(Ok(Operator::I32Const { value })) =
                offset_expr.get_operators_reader().into_iter().next()
            else {
                continue;
            };
            let base = u32::try_from(value).context("a data segment at a negative address")?;
            // Go's linker leaves runs of zeros out of its data segments, so
            // a segment may end just before the header's final NUL (memory
            // is zero there anyway): look for the header without it.
            let marker = &HEADER[..HEADER.len() - 1];
            let mut from = 0;
            while let Some(at) = segment.data[from..]
                .windows(marker.len())
                .position(|w| w == marker)
            {
                found.push(base + u32::try_from(from + at)?);
                from += at + 1;
            }
        }
    }
    match found.as_slice() {
        [address] => Ok(*address),
        [] => bail!(
            "the module has no memory reserved for the WASI adapter: is it built with the Gantry Go SDK (gantry.dev/go-sdk)?"
        ),
        _ => bail!(
            "the module reserves memory for the WASI adapter {} times",
            found.len()
        ),
    }
}

/// The body of `cabi_realloc_adapter(old, old_len, align, new_len)`: a
/// bump allocator over `heap`, whose next free address is global `next`.
fn allocator(heap: Range<u32>, next: u32) -> wasm_encoder::Function {
    use wasm_encoder::BlockType::Empty;
    let mut func = wasm_encoder::Function::new([(1, wasm_encoder::ValType::I32)]);
    let end = i32::try_from(heap.end).unwrap_or(i32::MAX);
    let code = &mut func.instructions();
    // A reallocation: shrinking keeps the block; growing is never asked for.
    code.local_get(0).if_(Empty);
    code.local_get(3).local_get(1).i32_le_u().if_(Empty);
    code.local_get(0).return_().end();
    code.unreachable().end();
    // p = (next + align - 1) & -align; trap past the end.
    code.global_get(next)
        .local_get(2)
        .i32_add()
        .i32_const(1)
        .i32_sub();
    code.i32_const(0)
        .local_get(2)
        .i32_sub()
        .i32_and()
        .local_tee(4);
    code.local_get(3)
        .i32_add()
        .i32_const(end)
        .i32_gt_u()
        .if_(Empty);
    code.unreachable().end();
    code.local_get(4).local_get(3).i32_add().global_set(next);
    code.local_get(4).end();
    func
}

/// `module` with `cabi_realloc_adapter` added (see the module doc).
pub(super) fn add_allocator(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    let base = find_heap(module)?;
    let heap = base + SKIP..base + SIZE;

    // What the new function, global and export need to know.
    let (mut imported_funcs, mut imported_globals) = (0u32, 0u32);
    let (mut defined_funcs, mut defined_globals) = (Vec::new(), 0u32);
    let mut realloc = None;
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload? {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    match import?.ty {
                        wasmparser::TypeRef::Func(_) => imported_funcs += 1,
                        wasmparser::TypeRef::Global(_) => imported_globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(functions) => {
                for ty in functions {
                    defined_funcs.push(ty?);
                }
            }
            Payload::GlobalSection(globals) => defined_globals = globals.count(),
            Payload::ExportSection(exports) => {
                for export in exports {
                    let export = export?;
                    if export.name == EXPORT {
                        bail!("the module already exports {EXPORT}");
                    }
                    if export.name == "cabi_realloc" {
                        realloc = Some(export.index);
                    }
                }
            }
            _ => {}
        }
    }
    let realloc = realloc.context("the module exports no cabi_realloc")?;
    let realloc_type = *defined_funcs
        .get((realloc - imported_funcs) as usize)
        .context("cabi_realloc is not a function of the module")?;
    let new_func = imported_funcs + u32::try_from(defined_funcs.len())?;
    let new_global = imported_globals + defined_globals;

    let mut out = wasm_encoder::Module::new();
    let mut reencoder = RoundtripReencoder;
    let mut code: Option<wasm_encoder::CodeSection> = None;
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload?;
        match &payload {
            Payload::Version { .. } | Payload::End(_) | Payload::CodeSectionStart { .. } => {}
            Payload::FunctionSection(functions) => {
                let mut section = wasm_encoder::FunctionSection::new();
                for ty in functions.clone() {
                    section.function(ty?);
                }
                section.function(realloc_type);
                out.section(&section);
            }
            Payload::GlobalSection(globals) => {
                let mut section = wasm_encoder::GlobalSection::new();
                reencoder
                    .parse_global_section(&mut section, globals.clone())
                    .map_err(|e| anyhow::anyhow!("re-encoding the globals: {e:?}"))?;
                section.global(
                    wasm_encoder::GlobalType {
                        val_type: wasm_encoder::ValType::I32,
                        mutable: true,
                        shared: false,
                    },
                    &wasm_encoder::ConstExpr::i32_const(i32::try_from(heap.start)?),
                );
                out.section(&section);
            }
            Payload::ExportSection(exports) => {
                let mut section = wasm_encoder::ExportSection::new();
                reencoder
                    .parse_export_section(&mut section, exports.clone())
                    .map_err(|e| anyhow::anyhow!("re-encoding the exports: {e:?}"))?;
                section.export(EXPORT, wasm_encoder::ExportKind::Func, new_func);
                out.section(&section);
            }
            Payload::CodeSectionEntry(body) => {
                code.get_or_insert_with(wasm_encoder::CodeSection::new)
                    .raw(&module[body.range()]);
                if code.as_ref().map(wasm_encoder::CodeSection::len)
                    == Some(u32::try_from(defined_funcs.len())?)
                {
                    let mut section = code.take().unwrap_or_default();
                    section.function(&allocator(heap.clone(), new_global));
                    out.section(&section);
                }
            }
            other => {
                let (id, range) = other
                    .as_section()
                    .context("an unexpected part of the module")?;
                out.section(&wasm_encoder::RawSection {
                    id,
                    data: &module[range],
                });
            }
        }
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module whose one data segment, at `offset`, holds `data`.
    fn module_with_data(offset: i32, data: &[u8]) -> Vec<u8> {
        let mut module = wasm_encoder::Module::new();
        let mut memories = wasm_encoder::MemorySection::new();
        memories.memory(wasm_encoder::MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&memories);
        let mut segments = wasm_encoder::DataSection::new();
        segments.active(
            0,
            &wasm_encoder::ConstExpr::i32_const(offset),
            data.iter().copied(),
        );
        module.section(&segments);
        module.finish()
    }

    #[test]
    fn the_heap_is_found_when_the_linker_left_out_the_headers_nul() {
        let mut data = b"before".to_vec();
        data.extend_from_slice(&HEADER[..HEADER.len() - 1]);
        assert_eq!(find_heap(&module_with_data(1024, &data)).unwrap(), 1030);
        let mut whole = b"xy".to_vec();
        whole.extend_from_slice(HEADER);
        whole.extend_from_slice(&[0; 16]);
        assert_eq!(find_heap(&module_with_data(64, &whole)).unwrap(), 66);
        let error = find_heap(&module_with_data(64, b"no header")).unwrap_err();
        assert!(error.to_string().contains("no memory reserved"), "{error}");
    }
}
