//! Node sensors: each node's own figures over the run, read by one process
//! per node (`docs/profile-json.md`, "nodes"; `docs/analyses.md`, "Node
//! sensors").

use serde::{Deserialize, Serialize};

/// One node's figures, from the readings of its sampler.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Host name.
    pub host: String,
    /// Readings received (each covers the time since its sampler's
    /// previous one).
    pub readings: u64,
    /// The processes that sampled, in the order they first did: one at a
    /// time, the next taking over when one exits.
    pub samplers: Vec<NodeSampler>,
    /// CPU time by kind over all readings (`/proc/stat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<NodeCpu>,
    /// Memory (`/proc/meminfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<NodeMemory>,
    /// Network, loopback left out (`/proc/net/dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NodeTraffic>,
    /// InfiniBand ports (`/sys/class/infiniband`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infiniband: Option<NodeTraffic>,
    /// Whole disks (`/proc/diskstats`): `in` is read, `out` written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<NodeTraffic>,
    /// Load average (`/proc/loadavg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<NodeLoad>,
}

/// One process that sampled its node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSampler {
    /// Its row in the program's per-rank lists.
    pub rank: usize,
    /// Its readings.
    pub readings: u64,
    /// Its first reading's start and its last reading's end, in ns since
    /// the program's origin.
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
}

/// The node's CPU time by kind: shares of all its CPUs' time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCpu {
    /// User and nice.
    pub user: f64,
    /// System, irq and softirq.
    pub system: f64,
    /// Idle.
    pub idle: f64,
    /// Idle waiting for I/O.
    pub iowait: f64,
    /// Taken by the hypervisor for other guests.
    pub steal: f64,
    /// `1 - idle - iowait` over the readings: their mean is the busy
    /// share of all time, this the highest of one reading.
    pub busy_max: f64,
}

/// The node's memory, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMemory {
    /// `MemTotal`.
    pub total_bytes: u64,
    /// `MemTotal - MemAvailable`: mean over the readings.
    pub used_bytes_mean: f64,
    /// Its highest reading.
    pub used_bytes_max: u64,
}

/// Traffic in and out of the node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTraffic {
    /// Bytes in (received; read for disks) over the readings.
    pub in_bytes: u64,
    /// Bytes out (sent; written for disks).
    pub out_bytes: u64,
    /// Packets in (reads completed for disks).
    pub in_packets: u64,
    /// Packets out (writes completed for disks).
    pub out_packets: u64,
    /// Bytes in per second over the time the readings cover.
    pub in_bytes_per_s_mean: f64,
    /// The highest of one reading.
    pub in_bytes_per_s_max: f64,
    /// Bytes out per second over the time the readings cover.
    pub out_bytes_per_s_mean: f64,
    /// The highest of one reading.
    pub out_bytes_per_s_max: f64,
}

/// The node's load average.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    /// The 1-minute load average: mean over the readings.
    pub load1_mean: f64,
    /// Its highest reading.
    pub load1_max: f64,
    /// The most runnable scheduling entities one reading saw.
    pub runnable_max: u64,
}
