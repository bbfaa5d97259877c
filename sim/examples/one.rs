//! One seed, printed (development aid; `vyrn sim` is the operator's command).
fn main() {
    let seed: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let kinds = std::env::args()
        .nth(2)
        .map(|k| vyrn_sim::home::FaultKinds::parse(&k).expect("kinds"))
        .unwrap_or(vyrn_sim::home::FaultKinds::NONE);
    let cfg = vyrn_sim::home::SimConfig {
        kinds,
        ..vyrn_sim::home::SimConfig::campaign(seed)
    };
    let r = vyrn_sim::home::run(&cfg).expect("run");
    for l in r.schedule.describe() {
        println!("  {l}");
    }
    println!("{r:#?}");
}
