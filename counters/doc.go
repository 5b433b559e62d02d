// Package counters keeps the security dashboard's counters in Redis: per
// minute and per hour, the sign-in outcomes, the rejections by rule and
// the rankings of sources and accounts, written by auth's Recorder
// (auth.EventCounter) and read alike by every replica
// (dashboard.Counters). It knows the events' kinds, not their meaning
// for the page, and nothing of Postgres or HTTP.
package counters
