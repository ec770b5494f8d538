//! Job registry throughput: jobs created, finished and their terminal
//! messages drained (reaped), in process; across 100 threads so retention
//! and thread scoping are exercised.
//!
//! Run: `cargo bench -p sandcrab --bench jobs`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sandcrab::jobs::{JobOutcome, JobRegistry};
use sandcrab::tools::TruncationPolicy;

const BATCH: u64 = 10_000;

fn lifecycle(c: &mut Criterion) {
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let threads: Vec<String> = (0..100).map(|t| format!("thread-{t}")).collect();
    let mut n: u64 = 0;
    let mut group = c.benchmark_group("jobs");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("create_finish_reap", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                let thread = &threads[(n % 100) as usize];
                let id = jobs
                    .start(thread, &format!("call-{n}"), "shell")
                    .unwrap()
                    .record
                    .job_id;
                jobs.finish(&id, JobOutcome::Succeeded("ok".into()));
                n += 1;
            }
            let mut reaped = 0;
            for thread in &threads {
                reaped += jobs.drain_messages(thread).len();
            }
            assert_eq!(reaped as u64, BATCH);
        })
    });
    group.finish();
}

criterion_group!(benches, lifecycle);
criterion_main!(benches);
