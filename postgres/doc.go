// Package postgres keeps what XCloak must not lose in PostgreSQL: users,
// sessions, reset and unlock tokens, known devices, the lockout log and
// the security events. It implements the storage interfaces that package
// auth declares and the reads the dashboard needs; it holds SQL and no
// policy. The schema lives in package migrations.
package postgres
