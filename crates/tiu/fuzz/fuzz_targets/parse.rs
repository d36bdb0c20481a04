//! Any bytes as a TiU header, a Setup option and a TCP option list: no panic, and whatever
//! `Repr::parse` accepts, `emit` writes back byte for byte.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tiu::wire::{classify, setup_option, with_setup_option, Packet, Repr, Setup};

fuzz_target!(|data: &[u8]| {
    let _ = classify(data);
    if let Ok(p) = Packet::new_checked(data) {
        // Accessors are safe on a checked packet.
        let _ = (
            p.encap_ports(),
            p.conn_id(),
            p.flags(),
            p.window(),
            p.seq_number(),
            p.ack_number(),
            p.options(),
            p.payload(),
        );
        if let Ok(r) = Repr::parse(&p) {
            assert_eq!(r.buffer_len(), data.len());
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(out, data, "emit(parse(x)) != x");
        }
    }
    let _ = Setup::parse(data);
    if let Ok(found) = setup_option(data) {
        if found.is_none() {
            if let Ok(o) = with_setup_option(data, Setup::Id(9)) {
                assert!(
                    o.len() <= 40 && o.len() % 4 == 0,
                    "appended options {} bytes",
                    o.len()
                );
                assert_eq!(setup_option(&o), Ok(Some(Setup::Id(9))));
                // Every option before it is kept as it was: only padding may go.
                let end = last_option_end(data);
                assert_eq!(
                    &o[..end],
                    &data[..end],
                    "options before the Setup option changed"
                );
            }
        }
    }
});

/// Where the last option other than NOP ends, before any EOL (the list is well formed here).
fn last_option_end(options: &[u8]) -> usize {
    let (mut i, mut end) = (0, 0);
    while i < options.len() {
        match options[i] {
            0 => break,
            1 => i += 1,
            _ => {
                i += options[i + 1] as usize;
                end = i;
            }
        }
    }
    end
}
