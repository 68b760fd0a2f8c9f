// Package clock is a node's view of time. Engine time enters the log only
// through the commands a leader stamps, so a leader whose wall clock is
// wrong would move every replica's time: end duplicate-detection windows,
// expire messages and activate schedules early, and, since engine time
// never goes back, leave later locks too long. This package bounds that.
//
//   - Source is every wall-clock reading a node makes; System is the
//     machine's clock plus an offset that exists for fault injection.
//   - Monitor keeps what pings measured of each peer's clock against this
//     node's (NTP style: offset ((t1-t0)+(t2-t3))/2, uncertainty half the
//     round trip) and judges this node's clock: healthy while a majority
//     of the cluster's clocks, this one included, are within the maximum
//     offset of it; skewed when a majority are beyond it; unconfirmed
//     otherwise (a two-node cluster whose clocks disagree, or too few
//     peers heard from to tell).
//   - Bounded is the time a leader stamps: the wall clock, but never more
//     than what the monotonic clock has seen since peers last vouched for
//     the wall clock, and nothing at all while the clock is not trusted.
//
// The package measures and judges; pinging peers, handing over leadership
// and refusing proposals are the node's and the partition's business.
package clock
