//! The GPIO bus (`nand_hal::onfi::gpio::GpioBus`) driving the real ONFI driver against the
//! cycle-level chip model, through simulated pins.
//!
//! The simulated pins, data port and delay share one [`Wire`]: a virtual clock in nanoseconds and
//! the levels of CLE, ALE, WE#, RE#, CE#, WP#, I/O0..7 and R/B#. The wire turns edges into the
//! model's cycles (a WE# rising edge latches a command, an address or a data byte as CLE / ALE
//! say; a RE# falling edge makes the target drive its next output byte, valid tREA later) and
//! checks the ONFI asynchronous interface timings of the mode the target is in (mode 0 at power
//! on, then whatever SET FEATURES 01h selected), independently of the bus: tWP, tWH, tWC, tCLS,
//! tCLH, tDS, tDH, tRP, tREH, tRC, tREA, tWHR, tCLR, tAR, tADL, tCCS, tRHW, tWB, CE# low, no bus
//! contention. R/B# falls tWB after the WE# edge that starts an operation (before that it still
//! reads ready, as on a real part), and the model's busy time runs on the wire's clock.

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{self, ErrorType, InputPin, OutputPin};
use nand_hal::onfi::gpio::{DataPort, GpioBus, GpioError, GpioPins, PinName};
use nand_hal::onfi::{
    cmd, feature, BusTiming, ModelConfig, ModelError, OnfiBus, OnfiChipModel, OnfiError, OnfiNand, ReadyLine,
    Wait,
};
use nand_hal::{BlockId, Error as _, ErrorKind, Geometry, NandFlash};

type Chip = OnfiChipModel<Vec<u8>>;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Line {
    Cle = 0,
    Ale,
    We,
    Re,
    Ce,
    Wp,
}

/// The last write cycle the target latched.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Latched {
    Command(u8),
    Address,
    Data,
}

/// SET FEATURES decoding, to follow the target's timing mode.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Feat {
    None,
    Addr,
    Data { addr: u8, n: u8, p1: u8 },
}

struct Wire {
    model: Chip,
    /// Virtual time, ns.
    now: u64,
    /// Model time already advanced, us.
    synced_us: u64,
    level: [bool; 6],
    changed: [u64; 6],
    /// The timings of the target's current mode.
    spec: BusTiming,
    t_ccs: u16,
    feat: Feat,
    port_out: bool,
    port_byte: u8,
    port_set_at: u64,
    chip_byte: u8,
    chip_valid_at: u64,
    we_fall: Option<u64>,
    we_rise: Option<u64>,
    re_fall: Option<u64>,
    re_rise: Option<u64>,
    /// The last latched write cycle and the one before, with their WE# rising edges.
    last: Option<(Latched, u64)>,
    prev: Option<(Latched, u64)>,
    /// R/B# still reads high until then although the target is busy.
    rb_falls_at: u64,
    /// Failure injection: this pin refuses, or the port does.
    fail_pin: Option<Line>,
    fail_port: bool,
    violations: Vec<String>,
    model_errors: Vec<ModelError>,
    rb_samples: u64,
    cycles_in_mode: [u64; 6],
}

impl Wire {
    fn new(model: Chip) -> Rc<RefCell<Wire>> {
        let t_ccs = model.config().param.t_ccs_ns;
        Rc::new(RefCell::new(Wire {
            model,
            now: 0,
            synced_us: 0,
            // Pull-ups: everything high until driven, CLE / ALE pulled low.
            level: [false, false, true, true, true, true],
            changed: [0; 6],
            spec: BusTiming::for_mode(0, t_ccs),
            t_ccs,
            feat: Feat::None,
            port_out: false,
            port_byte: 0,
            port_set_at: 0,
            chip_byte: 0,
            chip_valid_at: 0,
            we_fall: None,
            we_rise: None,
            re_fall: None,
            re_rise: None,
            last: None,
            prev: None,
            rb_falls_at: 0,
            fail_pin: None,
            fail_port: false,
            violations: Vec::new(),
            model_errors: Vec::new(),
            rb_samples: 0,
            cycles_in_mode: [0; 6],
        }))
    }

    fn violation(&mut self, what: &str) {
        self.violations.push(format!("{what} at {} ns (mode {})", self.now, self.spec.mode));
    }

    /// Checks that at least `min` ns passed since `since`.
    fn min_gap(&mut self, since: Option<u64>, min: u16, what: &str) {
        if let Some(t) = since {
            if self.now - t < min as u64 {
                let msg = format!("{what}: {} ns < {min} ns", self.now - t);
                self.violation(&msg);
            }
        }
    }

    fn delay(&mut self, ns: u64) {
        self.now += ns;
        let us = self.now / 1000;
        if us > self.synced_us {
            self.model.delay_us((us - self.synced_us) as u32);
            self.synced_us = us;
        }
    }

    fn set(&mut self, line: Line, high: bool) -> Result<(), SimError> {
        if self.fail_pin == Some(line) {
            return Err(SimError);
        }
        let i = line as usize;
        if self.level[i] == high {
            return Ok(());
        }
        let s = self.spec;
        match (line, high) {
            (Line::Cle | Line::Ale, _) => {
                if !self.level[Line::We as usize] {
                    self.violation("CLE/ALE changed while WE# low");
                }
                if !high {
                    self.min_gap(self.we_rise, s.t_clh, "tCLH/tALH");
                }
            }
            (Line::We, false) => {
                if self.level[Line::Ce as usize] {
                    self.violation("WE# pulse without CE#");
                }
                if !self.level[Line::Re as usize] {
                    self.violation("WE# low while RE# low");
                }
                self.min_gap(self.we_rise, s.t_wh, "tWH");
                self.min_gap(self.we_fall, s.t_wc, "tWC");
                if self.re_rise > self.we_rise {
                    self.min_gap(self.re_rise, s.t_rhw, "tRHW");
                }
                self.we_fall = Some(self.now);
            }
            (Line::We, true) => {
                self.min_gap(self.we_fall, s.t_wp, "tWP");
                self.level[i] = high;
                self.changed[i] = self.now;
                self.latch();
                return Ok(());
            }
            (Line::Re, false) => self.re_falls(),
            (Line::Re, true) => {
                self.min_gap(self.re_fall, s.t_rp, "tRP");
                self.re_rise = Some(self.now);
            }
            (Line::Ce, _) => {}
            (Line::Wp, _) => self.model.faults_mut().write_protect = !high,
        }
        self.level[i] = high;
        self.changed[i] = self.now;
        Ok(())
    }

    /// WE# rose: the target latches the cycle.
    fn latch(&mut self) {
        let s = self.spec;
        self.cycles_in_mode[s.mode as usize] += 1;
        let (cle, ale) = (self.level[Line::Cle as usize], self.level[Line::Ale as usize]);
        if cle {
            self.min_gap(Some(self.changed[Line::Cle as usize]), s.t_cls, "tCLS");
        }
        if ale {
            self.min_gap(Some(self.changed[Line::Ale as usize]), s.t_cls, "tALS");
        }
        if !self.port_out {
            self.violation("write cycle with the data port released");
        }
        self.min_gap(Some(self.port_set_at), s.t_ds, "tDS");
        let b = self.port_byte;
        let was_busy = self.model.is_busy();
        let kind = match (cle, ale) {
            (true, false) => Latched::Command(b),
            (false, true) => Latched::Address,
            (false, false) => Latched::Data,
            (true, true) => {
                self.violation("CLE and ALE both high");
                return;
            }
        };
        if kind == Latched::Data {
            if let Some((Latched::Address, t)) = self.last {
                self.min_gap(Some(t), s.t_adl, "tADL");
                if let Some((Latched::Command(cmd::CHANGE_WRITE_COLUMN), _)) = self.prev {
                    self.min_gap(Some(t), s.t_ccs, "tCCS (85h)");
                }
            }
        }
        let r = match kind {
            Latched::Command(c) => self.model.command(c),
            Latched::Address => self.model.address(&[b]),
            Latched::Data => self.model.write_data(&[b]),
        };
        if let Err(e) = r {
            self.model_errors.push(e);
        }
        self.follow_features(kind, b);
        if !was_busy && self.model.is_busy() {
            self.rb_falls_at = self.now + s.t_wb as u64;
        }
        self.prev = self.last;
        self.last = Some((kind, self.now));
        self.we_rise = Some(self.now);
    }

    /// Follows SET FEATURES 01h: the target runs the new mode from the next cycle on.
    fn follow_features(&mut self, kind: Latched, b: u8) {
        self.feat = match (self.feat, kind) {
            (_, Latched::Command(cmd::SET_FEATURES)) => Feat::Addr,
            (Feat::Addr, Latched::Address) => Feat::Data { addr: b, n: 0, p1: 0 },
            (Feat::Data { addr, n, p1 }, Latched::Data) => {
                let p1 = if n == 0 { b } else { p1 };
                if n == 3 {
                    if addr == feature::TIMING_MODE && !self.model.faults().ignore_set_features {
                        self.spec = BusTiming::for_mode(p1 & 0x0F, self.t_ccs);
                    }
                    Feat::None
                } else {
                    Feat::Data { addr, n: n + 1, p1 }
                }
            }
            _ => Feat::None,
        };
    }

    /// RE# fell: the target drives its next output byte.
    fn re_falls(&mut self) {
        let s = self.spec;
        self.cycles_in_mode[s.mode as usize] += 1;
        if self.level[Line::Ce as usize] {
            self.violation("RE# pulse without CE#");
        }
        if !self.level[Line::We as usize] {
            self.violation("RE# low while WE# low");
        }
        if self.port_out {
            self.violation("bus contention: RE# low while the port drives");
        }
        if self.level[Line::Cle as usize] || self.level[Line::Ale as usize] {
            self.violation("RE# low with CLE or ALE high");
        }
        self.min_gap(Some(self.changed[Line::Cle as usize]), s.t_clr, "tCLR");
        self.min_gap(Some(self.changed[Line::Ale as usize]), s.t_ar, "tAR");
        self.min_gap(self.re_rise, s.t_reh, "tREH");
        self.min_gap(self.re_fall, s.t_rc, "tRC");
        if self.we_rise > self.re_rise {
            match self.last {
                Some((Latched::Command(cmd::CHANGE_READ_COLUMN_CONFIRM), t)) => {
                    self.min_gap(Some(t), s.t_whr.max(s.t_ccs), "tCCS (E0h)")
                }
                Some((Latched::Command(_) | Latched::Address, t)) => self.min_gap(Some(t), s.t_whr, "tWHR"),
                _ => {}
            }
        }
        let mut b = [0u8];
        if let Err(e) = self.model.read_data(&mut b) {
            self.model_errors.push(e);
        }
        self.chip_byte = b[0];
        self.chip_valid_at = self.now + s.t_rea as u64;
        self.re_fall = Some(self.now);
    }

    fn port(&mut self, op: PortOp) -> Result<u8, SimError> {
        if self.fail_port {
            return Err(SimError);
        }
        let (we_low, re_low) = (!self.level[Line::We as usize], !self.level[Line::Re as usize]);
        match op {
            PortOp::Output => {
                if re_low {
                    self.violation("bus contention: port driven while RE# low");
                }
                self.port_out = true;
                self.port_set_at = self.now;
            }
            PortOp::Input => {
                if we_low {
                    self.violation("port released while WE# low");
                }
                self.min_gap(self.we_rise, self.spec.t_dh, "tDH");
                self.port_out = false;
            }
            PortOp::Write(b) => {
                if we_low {
                    self.violation("data changed while WE# low");
                }
                if b != self.port_byte {
                    self.min_gap(self.we_rise, self.spec.t_dh, "tDH");
                }
                self.port_byte = b;
                self.port_set_at = self.now;
            }
            PortOp::Read => {
                if self.port_out || !re_low {
                    self.violation("port sampled while the target does not drive it");
                    return Ok(0xA5);
                }
                if self.now < self.chip_valid_at {
                    self.violation("port sampled before tREA");
                    return Ok(!self.chip_byte);
                }
                return Ok(self.chip_byte);
            }
        }
        Ok(0)
    }

    fn rb(&mut self) -> Result<bool, SimError> {
        self.rb_samples += 1;
        if self.now < self.we_rise.map_or(0, |t| t + self.spec.t_wb as u64) {
            self.violation("R/B# sampled before tWB");
        }
        Ok(self.now < self.rb_falls_at || !self.model.is_busy())
    }
}

enum PortOp {
    Output,
    Input,
    Write(u8),
    Read,
}

/// An injected pin or port failure.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct SimError;

impl digital::Error for SimError {
    fn kind(&self) -> digital::ErrorKind {
        digital::ErrorKind::Other
    }
}

struct Pin(Rc<RefCell<Wire>>, Line);
struct Rb(Rc<RefCell<Wire>>);
struct Port(Rc<RefCell<Wire>>);
struct Delay(Rc<RefCell<Wire>>);

impl ErrorType for Pin {
    type Error = SimError;
}
impl OutputPin for Pin {
    fn set_low(&mut self) -> Result<(), SimError> {
        self.0.borrow_mut().set(self.1, false)
    }
    fn set_high(&mut self) -> Result<(), SimError> {
        self.0.borrow_mut().set(self.1, true)
    }
}
impl ErrorType for Rb {
    type Error = Infallible;
}
impl InputPin for Rb {
    fn is_high(&mut self) -> Result<bool, Infallible> {
        Ok(self.0.borrow_mut().rb().unwrap_or(false))
    }
    fn is_low(&mut self) -> Result<bool, Infallible> {
        self.is_high().map(|h| !h)
    }
}
impl DataPort for Port {
    type Error = SimError;
    fn set_output(&mut self) -> Result<(), SimError> {
        self.0.borrow_mut().port(PortOp::Output).map(drop)
    }
    fn set_input(&mut self) -> Result<(), SimError> {
        self.0.borrow_mut().port(PortOp::Input).map(drop)
    }
    fn write(&mut self, byte: u8) -> Result<(), SimError> {
        self.0.borrow_mut().port(PortOp::Write(byte)).map(drop)
    }
    fn read(&mut self) -> Result<u8, SimError> {
        self.0.borrow_mut().port(PortOp::Read)
    }
}
impl DelayNs for Delay {
    fn delay_ns(&mut self, ns: u32) {
        self.0.borrow_mut().delay(ns as u64);
    }
}

type Bus = GpioBus<Pin, Pin, Pin, Pin, Pin, Pin, Rb, Port, Delay>;

/// 2048 + 64 byte pages, 64 pages per block, 2 planes of 8 blocks (the MT29F4G08's shape, small).
fn geometry() -> Geometry {
    Geometry { blocks_per_plane: 8, ..Geometry::MT29F4G08 }
}

fn board() -> (Rc<RefCell<Wire>>, Bus) {
    board_of(&geometry())
}

fn board_of(geo: &Geometry) -> (Rc<RefCell<Wire>>, Bus) {
    let cfg = ModelConfig::for_geometry(geo).unwrap();
    let n = Chip::storage_bytes(&cfg).unwrap();
    let wire = Wire::new(OnfiChipModel::new(cfg, vec![0u8; n]).unwrap());
    let p = |l| Pin(wire.clone(), l);
    let pins = GpioPins {
        cle: p(Line::Cle),
        ale: p(Line::Ale),
        we: p(Line::We),
        re: p(Line::Re),
        ce: p(Line::Ce),
        wp: p(Line::Wp),
        rb: Rb(wire.clone()),
    };
    let bus = GpioBus::new(pins, Port(wire.clone()), Delay(wire.clone())).unwrap();
    (wire, bus)
}

fn clean(wire: &Rc<RefCell<Wire>>) {
    let w = wire.borrow();
    assert!(w.violations.is_empty(), "timing violations: {:?}", &w.violations[..w.violations.len().min(10)]);
    assert!(w.model_errors.is_empty(), "protocol errors: {:?}", w.model_errors);
}

#[test]
fn identifies_the_part_and_switches_to_its_fastest_mode() {
    let (wire, bus) = board();
    let nand = OnfiNand::new(bus).unwrap();
    let info = nand.info();
    assert_eq!(info.geometry, geometry());
    assert_eq!(info.id, wire.borrow().model.config().id);
    // The model's page offers modes 0-5, the bus all six: the part runs mode 5, and the wire
    // (which follows SET FEATURES on its own) agrees and saw cycles at mode 5.
    assert_eq!(info.interface.mode, 5);
    assert_eq!(nand.bus().timing(), &info.interface);
    let w = wire.borrow();
    assert_eq!(w.spec.mode, 5);
    assert!(w.cycles_in_mode[0] > 256, "the parameter page is read at mode 0");
    assert!(w.cycles_in_mode[5] > 0);
    drop(w);
    clean(&wire);
}

#[test]
fn a_restricted_bus_keeps_a_slower_mode() {
    let (wire, bus) = board();
    let nand = OnfiNand::new(bus.with_timing_modes(0b0111)).unwrap();
    assert_eq!(nand.info().interface.mode, 2);
    assert_eq!(wire.borrow().spec.mode, 2);
    clean(&wire);
}

#[test]
fn program_read_and_erase_a_page() {
    let (wire, bus) = board();
    let mut nand = OnfiNand::new(bus).unwrap();
    let g = geometry();
    let page = g.page(BlockId(3), 5);
    let data: Vec<u8> = (0..g.data_bytes).map(|i| (i * 7 + 3) as u8).collect();
    let spare: Vec<u8> = (0..g.spare_bytes).map(|i| 0xF0 ^ i as u8).collect();
    nand.program_page(page, &data, &spare).unwrap();
    // The array holds what was sent (checked on the model, not through the bus).
    {
        let w = wire.borrow();
        let (d, s) = w.model.page(page).unwrap();
        assert_eq!((d, s), (&data[..], &spare[..]));
    }
    let (mut d, mut s) = (vec![0u8; data.len()], vec![0u8; spare.len()]);
    nand.read_page(page, &mut d, &mut s).unwrap();
    assert_eq!((&d, &s), (&data, &spare));
    // A short data buffer: the spare comes by CHANGE READ COLUMN (tCCS after E0h).
    let (mut d16, mut s4) = ([0u8; 16], [0u8; 4]);
    nand.read_page(page, &mut d16, &mut s4).unwrap();
    assert_eq!((&d16[..], &s4[..]), (&data[..16], &spare[..4]));
    nand.erase_block(BlockId(3)).unwrap();
    nand.read_page(page, &mut d, &mut s).unwrap();
    assert!(d.iter().chain(&s).all(|&b| b == 0xFF));
    assert_eq!(wire.borrow().model.page(page).unwrap().0, &vec![0xFF; data.len()][..]);
    clean(&wire);
}

#[test]
fn ready_busy_is_sampled_after_twb_and_follows_the_busy_time() {
    let (wire, bus) = board();
    let mut nand = OnfiNand::new(bus).unwrap();
    let t_bers_ns = wire.borrow().model.config().timing.t_bers_us as u64 * 1000;
    let layout = nand.info().address;
    let mut cycles = [0u8; 8];
    let n = layout.encode_row(layout.block_row(BlockId(2)), &mut cycles);
    let bus = nand.bus_mut();
    bus.command(cmd::ERASE).unwrap();
    bus.address(&cycles[..n]).unwrap();
    bus.command(cmd::ERASE_CONFIRM).unwrap();
    let confirm = wire.borrow().we_rise.unwrap();
    // The target went busy at the confirm edge; R/B# fell tWB later and the bus waited for it.
    assert_eq!(bus.ready_line().unwrap(), ReadyLine::Busy);
    let first_sample = wire.borrow().now;
    assert!(first_sample >= confirm + wire.borrow().spec.t_wb as u64);
    // A wait shorter than tBERS times out after about its length, still busy.
    assert_eq!(bus.wait_ready(100).unwrap(), Wait::TimedOut);
    let after_timeout = wire.borrow().now;
    assert!((100_000..110_000).contains(&(after_timeout - first_sample)), "{}", after_timeout - first_sample);
    // Then ready exactly when tBERS has run out (the poll step is 1 us).
    assert_eq!(bus.wait_ready(10_000).unwrap(), Wait::Ready);
    let ready = wire.borrow().now;
    assert!(ready - confirm >= t_bers_ns, "{} ns", ready - confirm);
    assert!(ready - confirm <= t_bers_ns + 2_000, "{} ns", ready - confirm);
    assert!(!wire.borrow().model.is_busy());
    clean(&wire);
}

/// The wire's checker is not blind: a bus told that every timing is 0 breaks them, and sampling
/// R/B# right after the confirm reads the stale "ready" a real part shows before tWB.
#[test]
fn the_wire_catches_a_bus_without_gaps() {
    let (wire, mut bus) = board();
    let zero = BusTiming {
        mode: 0,
        t_wc: 0,
        t_wp: 0,
        t_wh: 0,
        t_rc: 0,
        t_rp: 0,
        t_reh: 0,
        t_rea: 0,
        t_cls: 0,
        t_clh: 0,
        t_ds: 0,
        t_dh: 0,
        t_clr: 0,
        t_ar: 0,
        t_adl: 0,
        t_ccs: 0,
        t_whr: 0,
        t_rhw: 0,
        t_wb: 0,
    };
    bus.set_timing(&zero).unwrap();
    bus.command(cmd::RESET).unwrap();
    assert_eq!(bus.ready_line().unwrap(), ReadyLine::Ready, "stale R/B# before tWB");
    assert!(wire.borrow().model.is_busy());
    let mut id = [0u8; 2];
    bus.delay_us(10);
    bus.command(cmd::READ_ID).unwrap();
    bus.address(&[0]).unwrap();
    bus.read_data(&mut id).unwrap();
    let v = wire.borrow().violations.join("\n");
    for what in ["R/B# sampled before tWB", "tWP", "tWH", "tWHR", "tREA"] {
        assert!(v.contains(what), "{what} not caught:\n{v}");
    }
}

#[test]
fn a_part_that_never_becomes_ready_times_out() {
    let (wire, bus) = board();
    let mut nand = OnfiNand::new(bus).unwrap();
    let erase_us = nand.timeouts().erase_us as u64;
    wire.borrow_mut().model.faults_mut().stuck_busy = true;
    let start = wire.borrow().now;
    let e = nand.erase_block(BlockId(1)).unwrap_err();
    assert_eq!(e, OnfiError::Timeout);
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let waited = wire.borrow().now - start;
    assert!(waited >= erase_us * 1000 && waited < erase_us * 1000 + 100_000, "{waited} ns");
    clean(&wire);
}

#[test]
fn write_protect_pin_blocks_programs() {
    let (wire, mut bus) = board();
    bus.set_write_protect(true).unwrap();
    let mut nand = OnfiNand::new(bus).unwrap();
    let page = geometry().page(BlockId(0), 0);
    assert_eq!(nand.program_page(page, &[0u8; 8], &[]).unwrap_err(), OnfiError::WriteProtected);
    assert_eq!(wire.borrow().model.page(page).unwrap().0[0], 0xFF);
    nand.bus_mut().set_write_protect(false).unwrap();
    nand.program_page(page, &[0u8; 8], &[]).unwrap();
    assert_eq!(wire.borrow().model.page(page).unwrap().0[..8], [0u8; 8]);
    clean(&wire);
}

#[test]
fn pin_and_port_errors_are_typed() {
    let (wire, bus) = board();
    let mut nand = OnfiNand::new(bus).unwrap();
    let page = geometry().page(BlockId(0), 0);
    wire.borrow_mut().fail_pin = Some(Line::We);
    let e = nand.program_page(page, &[1u8; 4], &[]).unwrap_err();
    assert_eq!(e, OnfiError::Bus(GpioError::Pin { pin: PinName::We, kind: digital::ErrorKind::Other }));
    assert_eq!(e.kind(), ErrorKind::Other);
    wire.borrow_mut().fail_pin = None;
    wire.borrow_mut().fail_port = true;
    let mut buf = [0u8; 4];
    let e = nand.read_page(page, &mut buf, &mut []).unwrap_err();
    assert_eq!(e, OnfiError::Bus(GpioError::Port(SimError)));
    assert_eq!(e.kind(), ErrorKind::Other);
    // Nothing was programmed by the cycles that did get through.
    assert!(wire.borrow().model.page(page).unwrap().0.iter().all(|&b| b == 0xFF));
}

/// The README's "new board" recipe, end to end on the wire: the ONFI driver identifies the part
/// through the GPIO bus, the FTL formats it, writes every logical page (and overwrites a third,
/// so GC runs), unmounts; the driver re-identifies the part and the FTL mounts and reads it all
/// back. No timing violation, no protocol error on the way.
#[test]
fn the_ftl_runs_on_the_gpio_bus() {
    use ftl_core::policy::DefaultPolicies;
    use ftl_core::{BlockInfo, Config, FlatMap, Ftl, Memory, RamLayout};
    // The MT29F4G08's rules on 512 + 32 byte pages, 16 pages per block, 2 planes of 32 blocks.
    let geo = Geometry {
        data_bytes: 512,
        spare_bytes: 32,
        pages_per_block: 16,
        blocks_per_plane: 32,
        ..Geometry::MT29F4G08
    };
    let (wire, bus) = board_of(&geo);
    let nand = OnfiNand::new(bus).unwrap();
    assert_eq!(nand.geometry(), geo);
    let cfg = Config::for_utilization(&geo, 600);
    let lay = RamLayout::new(&geo, &cfg);
    let (mut map, mut valid) = (vec![0u32; lay.map_words], vec![0u32; lay.valid_words]);
    let (mut blocks, mut heads) = (vec![BlockInfo::EMPTY; lay.blocks], vec![0u32; lay.list_heads]);
    let mut page = vec![0u8; lay.page_buf];
    let content = |lpn: u32, generation: u32| -> Vec<u8> {
        (0..geo.data_bytes).map(|i| (lpn.wrapping_mul(31) ^ generation.wrapping_mul(7) ^ i) as u8).collect()
    };
    let (bus, generation) = {
        let mem =
            Memory { valid: &mut valid, blocks: &mut blocks, list_heads: &mut heads, page_buf: &mut page };
        let mut ftl =
            Ftl::format(nand, DefaultPolicies::default(), FlatMap::new(&mut map), mem, cfg).unwrap();
        let n = ftl.capacity_pages();
        let mut generation = vec![1u32; n as usize];
        for lpn in 0..n {
            ftl.write(lpn, &content(lpn, 1)).unwrap();
        }
        for lpn in (0..n).step_by(3) {
            ftl.write(lpn, &content(lpn, 2)).unwrap();
            generation[lpn as usize] = 2;
        }
        (ftl.unmount().unwrap().release(), generation)
    };
    {
        let w = wire.borrow();
        let c = w.model.counters();
        let n = generation.len() as u64;
        assert!(c.page_programs >= n + n / 3, "{} programs for {} writes", c.page_programs, n + n / 3);
        assert!(c.bytes_in >= (n + n / 3) * geo.data_bytes as u64, "every byte went over the wire");
        assert!(c.block_erases > 0, "GC ran");
        eprintln!(
            "{n} logical pages, {} programs, {} erases, {} ms of bus time",
            c.page_programs,
            c.block_erases,
            w.now / 1_000_000
        );
    }
    let nand = OnfiNand::new(bus).unwrap();
    let mem = Memory { valid: &mut valid, blocks: &mut blocks, list_heads: &mut heads, page_buf: &mut page };
    let mut ftl = Ftl::mount(nand, DefaultPolicies::default(), FlatMap::new(&mut map), mem, cfg).unwrap();
    let mut got = vec![0u8; geo.data_bytes as usize];
    for (lpn, &g) in generation.iter().enumerate() {
        ftl.read(lpn as u32, &mut got).unwrap();
        assert!(got == content(lpn as u32, g), "lpn {lpn} generation {g}");
    }
    drop(ftl);
    clean(&wire);
}
