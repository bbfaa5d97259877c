//! The load generator's metrics (`vyrn load --metrics`, docs/sre.md): its table ([`METRICS`]) and
//! the rendering through it.

use vyrn_metrics::Exposition;

use super::LoadGen;

vyrn_metrics::metrics! {
    /// Every family this role renders (docs/sre.md's metric reference and the Grafana
    /// dashboard are generated from the tables: `vyrn metrics`).
    pub METRICS;
    LOAD_SENT: Counter "vyrn_load_sent_total" ["kind"]
        "messages sent, by kind";
    LOAD_ANSWERED: Counter "vyrn_load_answered_total" []
        "new orders answered (Ack, first Fill, Out or Reject)";
    LOAD_FILLS: Counter "vyrn_load_fills_total" []
        "fills received";
    LOAD_DURABLE: Counter "vyrn_load_durable_total" []
        "fills made durable";
    LOAD_FINAL: Counter "vyrn_load_final_total" []
        "fills made final";
    LOAD_REVERTED: Counter "vyrn_load_reverted_total" []
        "fills a tenure's seal reverted (07 §9.6): in no final log";
    LOAD_FILLS_NOT_DURABLE: Gauge "vyrn_load_fills_not_durable" []
        "fills still waiting for their Durable fact";
    LOAD_FILLS_NOT_FINAL: Gauge "vyrn_load_fills_not_final" []
        "fills still waiting for their Final fact";
    LOAD_REFUSED: Counter "vyrn_load_refused_total" []
        "submits a session refused (retried)";
    LOAD_LATENCY_SECONDS: Gauge "vyrn_load_latency_seconds" ["what", "quantile"]
        "latency over the run so far, from intended send times (open loop)";
    LOAD_LATENCY_SAMPLES: Counter "vyrn_load_latency_samples_total" ["what"]
        "samples in each distribution";
}

/// The generator's counts and latency quantiles (cumulative over the run) in Prometheus form.
pub fn render(load: &LoadGen, e: &mut Exposition) {
    let k = load.counts;
    for (i, kind) in ["resting_gtc", "crossing_gtc", "cancel", "ioc"]
        .iter()
        .enumerate()
    {
        e.put_counter(&LOAD_SENT, &[kind], k.sent[i]);
    }
    e.put_counter(&LOAD_ANSWERED, &[], k.answered);
    e.put_counter(&LOAD_FILLS, &[], k.fills);
    e.put_counter(&LOAD_DURABLE, &[], k.durable);
    e.put_counter(&LOAD_FINAL, &[], k.fin);
    e.put_counter(&LOAD_REVERTED, &[], k.reverted);
    e.put_gauge(
        &LOAD_FILLS_NOT_DURABLE,
        &[],
        load.fills_not_durable() as f64,
    );
    e.put_gauge(&LOAD_FILLS_NOT_FINAL, &[], load.fills_not_final() as f64);
    e.put_counter(&LOAD_REFUSED, &[], k.refused);
    let st = &load.stats;
    for (what, l) in [
        ("request_ack", &st.req_ack),
        ("request_fill", &st.req_fill),
        ("fill_durable", &st.fill_durable),
        ("fill_final", &st.fill_final),
    ] {
        let p = l.percentiles();
        let h = l.histogram();
        let at = |q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        for (q, v) in [
            ("0.25", at(0.25)),
            ("0.5", p.p50),
            ("0.75", at(0.75)),
            ("0.9", at(0.9)),
            ("0.95", at(0.95)),
            ("0.99", p.p99),
            ("0.999", p.p999),
            ("1", p.max),
        ] {
            e.put_gauge(&LOAD_LATENCY_SECONDS, &[what, q], v as f64 / 1e9);
        }
        e.put_counter(&LOAD_LATENCY_SAMPLES, &[what], p.n);
    }
}
