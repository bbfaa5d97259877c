//! 07 §14's failure matrix as named runs (`vyrn sim --scenario`), each with its schedule and
//! its expected outcome.

use super::*;

/// The rows of 07 §14's failure matrix the code implements today, each a named run with its
/// expected outcome (`vyrn sim --scenario`). Rows not built yet (the rest of a sequencer crash
/// and of equivocation — the seal and the promotion —, cut from ≥ 2 voters; the NVMe drive: the
/// simulated disk; a leader down: Simplex in the simulator; two different copies, a Byzantine
/// voter, a root divergence) are listed in docs/testing.md and join as their issues land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// §14 "one frame lost on one path": 5 % loss on path A.
    OneFrameLostOnOnePath,
    /// §14 "frame lost on both paths to one replica": 5 % loss on both paths as voter 2
    /// receives them; NACK repair.
    FrameLostOnBothPathsToOneReplica,
    /// §14 "one order path down": path A dark from 50 ms to the end.
    OneOrderPathDown,
    /// §14 "one voter crash": voter 3 cut off from 50 ms to the end.
    OneVoterDown,
    /// §14 "two voters down (BASE)" and "finality lags > 8 closed blocks": voters 1 and 2 cut
    /// off for 30 ms; the gate halts the book and resumes once they are back.
    TwoVotersDownThenBack,
    /// §14 "data box down": silent for 50 ms.
    DataBoxDown,
    /// The sequencer cut off from one voter for 80 ms (the one-voter case of §14 "sequencer
    /// cut off from ≥ 2 voters": no fence).
    BoxCutFromOneVoter,
    /// §14 "sequencer crash", as far as it is built: the whole box paused 20 ms, then back.
    BoxPause,
    /// §14 "sequencer equivocation" (07 §10.1), as far as it is built: voter 0 finds two
    /// headers the box signed for one height.
    Equivocation,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 9] = [
        Scenario::OneFrameLostOnOnePath,
        Scenario::FrameLostOnBothPathsToOneReplica,
        Scenario::OneOrderPathDown,
        Scenario::OneVoterDown,
        Scenario::TwoVotersDownThenBack,
        Scenario::DataBoxDown,
        Scenario::BoxCutFromOneVoter,
        Scenario::BoxPause,
        Scenario::Equivocation,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::OneFrameLostOnOnePath => "path-loss",
            Scenario::FrameLostOnBothPathsToOneReplica => "both-paths-loss-to-one",
            Scenario::OneOrderPathDown => "path-down",
            Scenario::OneVoterDown => "voter-down",
            Scenario::TwoVotersDownThenBack => "two-voters-down",
            Scenario::DataBoxDown => "databox-down",
            Scenario::BoxCutFromOneVoter => "box-cut-from-voter",
            Scenario::BoxPause => "box-pause",
            Scenario::Equivocation => "equivocation",
        }
    }

    /// The scenario named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|x| x.name()).collect();
                format!("unknown scenario {s:?} ({})", names.join(", "))
            })
    }

    /// What 07 §14 expects of it.
    pub fn expected(self) -> &'static str {
        match self {
            Scenario::OneFrameLostOnOnePath => {
                "the other path's copy is taken: no response delayed, nothing lost, no repair needed"
            }
            Scenario::FrameLostOnBothPathsToOneReplica => {
                "holes repaired by NACK; finality and replay unaffected"
            }
            Scenario::OneOrderPathDown => "REP_A_PATH; trading continues on path B",
            Scenario::OneVoterDown => "finality continues with the other three (Q = 3)",
            Scenario::TwoVotersDownThenBack => {
                "no Q: the finality gate halts the book within 8 blocks; back: it resumes and every order is final"
            }
            Scenario::DataBoxDown => {
                "payloads come from peers or the sequencer; finality continues"
            }
            Scenario::BoxCutFromOneVoter => {
                "the box counts the other three voters' acks: no fence, trading continues"
            }
            Scenario::BoxPause => {
                "every voter suspects after FAILOVER_SILENCE_MS and Q Silence depose the tenure at each within 07 §9.7's 3.6 ms; the box's frames after it resumes are refused (INV-REP-5); the book stays halted (the seal and the promotion are not built)"
            }
            Scenario::Equivocation => {
                "voter 0 sends the evidence to every peer; each checks it and suspects at once (EQUIV): Q Silence depose the tenure at every voter within 1 ms though the box still sends; its frames are refused from then on (INV-REP-5); the book stays halted"
            }
        }
    }

    /// Its schedule: a clean network (30 µs hops, 20 µs jitter) with this row's fault.
    pub fn schedule(self, load_ns: u64) -> Schedule {
        let mut s = Schedule {
            base_ns: 30_000,
            jitter_ns: 20_000,
            path_loss: [0.0; 2],
            dup: 0.0,
            voter_path_loss: None,
            windows: Vec::new(),
        };
        let _ = load_ns;
        let end = u64::MAX;
        let w = |cut, from_ms: u64, to: u64| Window {
            cut,
            from: T0 + from_ms * 1_000_000,
            to,
        };
        match self {
            Scenario::OneFrameLostOnOnePath => s.path_loss = [0.05, 0.0],
            Scenario::FrameLostOnBothPathsToOneReplica => s.voter_path_loss = Some((2, 0.05)),
            Scenario::OneOrderPathDown => s.windows.push(w(Cut::PathDown(0), 50, end)),
            Scenario::OneVoterDown => s.windows.push(w(Cut::Voter(3), 50, end)),
            Scenario::TwoVotersDownThenBack => {
                for v in [1, 2] {
                    s.windows.push(w(Cut::Voter(v), 60, T0 + 90_000_000));
                }
            }
            Scenario::DataBoxDown => s.windows.push(w(Cut::DataBox, 60, T0 + 110_000_000)),
            Scenario::BoxCutFromOneVoter => {
                s.windows.push(w(Cut::BoxFrom(1), 60, T0 + 140_000_000));
            }
            Scenario::BoxPause => s.windows.push(w(Cut::BoxPause, 60, T0 + 80_000_000)),
            Scenario::Equivocation => s.windows.push(w(Cut::Equivocate, 60, end)),
        }
        s
    }

    /// The row's own expectations beyond the invariants every run checks.
    pub fn check(self, r: &Report) -> Result<(), String> {
        let f = &r.figures;
        let ok = match self {
            Scenario::OneFrameLostOnOnePath => {
                r.net.lost > 0 && f.gate_halts == 0 && f.path_alarms == [0, 0]
            }
            Scenario::FrameLostOnBothPathsToOneReplica => r.net.lost > 0 && f.repaired > 0,
            Scenario::OneOrderPathDown => {
                r.net.partitioned > 1000 && f.gate_halts == 0 && f.path_alarms == [4, 0]
            }
            Scenario::OneVoterDown => r.net.partitioned > 0 && f.gate_halts == 0,
            Scenario::TwoVotersDownThenBack => f.gate_halts > 0 && f.gate_resumes > 0,
            Scenario::DataBoxDown => f.fetched > 0,
            Scenario::BoxCutFromOneVoter => r.net.partitioned > 0 && f.gate_halts == 0,
            Scenario::BoxPause => {
                f.deposed == 4 && f.deposed_after_ns <= DEPOSE_BUDGET_NS && f.refused_deposed > 0
            }
            Scenario::Equivocation => {
                f.deposed == 4 && f.deposed_after_ns <= 1_000_000 && f.refused_deposed > 0
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{}: expected \"{}\"; saw {f:?}, network {:?}",
                self.name(),
                self.expected(),
                r.net
            ))
        }
    }
}
