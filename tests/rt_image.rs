//! The policy image (crates/remit-rt/src/image.rs, written by crates/remit-lang/src/wasm/image.rs): every example's and semantics
//! folder's image is read back by the runtime crate's reader, and what it holds is what the program says.

mod support;

use remit_rt::image::{Image, Mandate, Tool, MAX_DECIDING};

#[test]
fn every_image_reads_back_as_its_program() {
    assert_eq!(MAX_DECIDING, remit_lang::check::limits::MAX_RULES_PER_TOOL);
    for unit in support::corpus() {
        let program = &unit.program;
        let bytes = remit_lang::wasm::image::write(program).unwrap();
        let image = Image::new(&bytes).unwrap_or_else(|| panic!("{}: no image header", unit.name));
        let h = image.header;
        assert_eq!(h.image_len as usize, bytes.len());
        assert_eq!(image.str(h.policy_off, h.policy_len), serde_json::to_string(&program.hash).unwrap().as_bytes());
        assert_eq!(h.tools_count as usize, program.tools.len(), "{}", unit.name);
        for (i, tool) in program.tools.iter().enumerate() {
            let name = tool.name.as_bytes();
            let found = image.find(h.tool_slots_off, h.tool_slots_len, || name.iter().copied(), |j| image.tool_name(j));
            assert_eq!(found, Some(i as u32), "{}: tool {}", unit.name, tool.name);
            let record: Tool = image.tool(i as u32);
            assert_eq!(record.params_count as usize, tool.params.len());
            assert_eq!(record.level as usize, tool.level);
        }
        let absent = b"no such tool";
        assert_eq!(
            image.find(h.tool_slots_off, h.tool_slots_len, || absent.iter().copied(), |j| image.tool_name(j)),
            None
        );
        // The listing order is the order of the names.
        let listed: Vec<&[u8]> =
            (0..h.tools_count).map(|i| image.tool_name(image.word(h.listing_off + 4 * i))).collect();
        let mut names: Vec<&[u8]> = program.tools.iter().map(|t| t.name.as_bytes()).collect();
        names.sort();
        assert_eq!(listed, names, "{}", unit.name);
        for (i, mandate) in program.mandates.iter().enumerate() {
            let name = mandate.name.as_bytes();
            let found = image.find(
                h.mandate_slots_off,
                h.mandate_slots_len,
                || name.iter().copied(),
                |j| image.mandate_name(j),
            );
            assert_eq!(found, Some(i as u32), "{}: mandate {}", unit.name, mandate.name);
            let record: Mandate = image.mandate(i as u32);
            let chain: Vec<usize> =
                (0..record.chain_count).map(|k| image.word(record.chain_off + 4 * k) as usize).collect();
            assert_eq!(chain, program.chain(i));
            let json: Vec<String> = chain.iter().map(|&m| program.mandates[m].name.clone()).collect();
            let written = image.str(record.chain_json_off, record.chain_json_len);
            assert_eq!(written, serde_json::to_string(&json).unwrap().as_bytes());
            // Every clause entry is a deciding rule of this mandate.
            let entry = image.entry(record.otherwise_entry);
            let rule: serde_json::Value = serde_json::from_slice(image.str(entry.json_off, entry.json_len)).unwrap();
            assert_eq!(rule["mandate"], mandate.name.as_str());
        }
        // Ranks are a permutation.
        let mut ranks: Vec<u32> = (0..h.entries_count).map(|i| image.entry(i).rank).collect();
        ranks.sort();
        assert_eq!(ranks, (0..h.entries_count).collect::<Vec<_>>());
    }
}
