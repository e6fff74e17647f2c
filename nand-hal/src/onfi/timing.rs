//! [`BusTiming`]: the asynchronous (SDR) interface timings of ONFI timing modes 0 to 5, which a
//! bus must respect between cycles, and the choice of the mode ([`common_mode`]): the fastest
//! that both the part (parameter page bytes 129-130) and the bus ([`super::OnfiBus::timing_modes`])
//! support.
//!
//! Values are the ONFI 4.0 SDR table's minimums (maximums for tREA, tWB), in nanoseconds; tCCS
//! comes from the parameter page (bytes 139-140) when the part gives one, else the spec's
//! default of 500 ns. The driver selects the mode on the part with SET FEATURES (01h), reads it
//! back, then hands the bus the timings ([`super::OnfiBus::set_timing`]).

/// Interface timings of one mode, nanoseconds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BusTiming {
    /// The ONFI asynchronous timing mode, 0 to 5.
    pub mode: u8,
    /// Write cycle (WE# period).
    pub t_wc: u16,
    /// WE# pulse width.
    pub t_wp: u16,
    /// WE# high hold.
    pub t_wh: u16,
    /// Read cycle (RE# period).
    pub t_rc: u16,
    /// RE# pulse width.
    pub t_rp: u16,
    /// RE# high hold.
    pub t_reh: u16,
    /// RE# access time (maximum).
    pub t_rea: u16,
    /// CLE / ALE set-up before WE# rises.
    pub t_cls: u16,
    /// CLE / ALE hold after WE# rises.
    pub t_clh: u16,
    /// Data set-up.
    pub t_ds: u16,
    /// Data hold.
    pub t_dh: u16,
    /// CLE to RE# low.
    pub t_clr: u16,
    /// ALE to RE# low.
    pub t_ar: u16,
    /// Last address cycle to first data input cycle.
    pub t_adl: u16,
    /// Change column set-up (05h/06h-E0h or 85h to data).
    pub t_ccs: u16,
    /// WE# high (command) to RE# low (status or data out).
    pub t_whr: u16,
    /// RE# high to WE# low (data out to the next command).
    pub t_rhw: u16,
    /// WE# high to R/B# low (maximum): before it, R/B# means nothing.
    pub t_wb: u16,
}

/// The ONFI 4.0 SDR table, modes 0 to 5 (tCCS at the spec default).
const TABLE: [BusTiming; 6] = [
    t(0, [100, 50, 30, 100, 50, 30, 40, 50, 20, 40, 20, 20, 25, 400, 500, 120, 200, 200]),
    t(1, [45, 25, 15, 50, 25, 15, 30, 25, 10, 20, 10, 10, 10, 400, 500, 80, 100, 100]),
    t(2, [35, 17, 15, 35, 17, 15, 25, 15, 10, 15, 5, 10, 10, 400, 500, 80, 100, 100]),
    t(3, [30, 15, 10, 30, 15, 10, 20, 10, 5, 10, 5, 10, 10, 400, 500, 80, 100, 100]),
    t(4, [25, 12, 10, 25, 12, 10, 20, 10, 5, 10, 5, 10, 10, 400, 500, 80, 100, 100]),
    t(5, [20, 10, 7, 20, 10, 7, 16, 10, 5, 7, 5, 10, 10, 400, 500, 80, 100, 100]),
];

const fn t(mode: u8, v: [u16; 18]) -> BusTiming {
    BusTiming {
        mode,
        t_wc: v[0],
        t_wp: v[1],
        t_wh: v[2],
        t_rc: v[3],
        t_rp: v[4],
        t_reh: v[5],
        t_rea: v[6],
        t_cls: v[7],
        t_clh: v[8],
        t_ds: v[9],
        t_dh: v[10],
        t_clr: v[11],
        t_ar: v[12],
        t_adl: v[13],
        t_ccs: v[14],
        t_whr: v[15],
        t_rhw: v[16],
        t_wb: v[17],
    }
}

impl BusTiming {
    /// Mode 0, which every ONFI part runs at power-on.
    pub const MODE_0: BusTiming = TABLE[0];

    /// The timings of `mode` (clamped to 0..=5), with the part's tCCS (`t_ccs_ns`, 0: the spec
    /// default of 500 ns).
    pub const fn for_mode(mode: u8, t_ccs_ns: u16) -> BusTiming {
        let mut b = TABLE[if mode > 5 { 5 } else { mode as usize }];
        if t_ccs_ns != 0 {
            b.t_ccs = t_ccs_ns;
        }
        b
    }
}

/// The fastest mode in both masks (bit m = mode m); mode 0 if they share none.
pub const fn common_mode(part_modes: u16, bus_modes: u16) -> u8 {
    let both = part_modes & bus_modes & 0x3F;
    if both == 0 {
        0
    } else {
        (15 - both.leading_zeros()) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_get_faster_and_keep_the_spec_constants() {
        for m in 1..6u8 {
            let (a, b) = (BusTiming::for_mode(m - 1, 0), BusTiming::for_mode(m, 0));
            assert!(b.t_wc < a.t_wc && b.t_rc < a.t_rc, "mode {m}");
            assert_eq!(b.t_adl, 400);
        }
        assert_eq!(BusTiming::MODE_0.t_whr, 120);
        assert_eq!(BusTiming::for_mode(9, 0).mode, 5);
        assert_eq!(BusTiming::for_mode(0, 100).t_ccs, 100);
        assert_eq!(BusTiming::for_mode(0, 0).t_ccs, 500);
    }

    #[test]
    fn common_mode_is_the_fastest_shared() {
        assert_eq!(common_mode(0x3F, 0x01), 0);
        assert_eq!(common_mode(0x3F, 0x0F), 3);
        assert_eq!(common_mode(0x07, 0x3F), 2);
        assert_eq!(common_mode(0x30, 0x0F), 0);
    }
}
