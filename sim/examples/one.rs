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
    let plant = std::env::args()
        .nth(3)
        .map(|p| vyrn_sim::home::Plant::parse(&p).expect("plant"));
    let cfg = vyrn_sim::home::SimConfig {
        kinds,
        plant,
        ..vyrn_sim::home::SimConfig::campaign(seed)
    };
    let r = vyrn_sim::home::run(&cfg).expect("run");
    for l in r.schedule.describe() {
        println!("  {l}");
    }
    println!("{r:#?}");
}
