// Package testenv gives tests real, isolated backing services: a key prefix
// on the standalone Redis, a key prefix on a three-master Redis Cluster, and
// a fresh Postgres database. Each helper registers a cleanup that removes
// exactly what the test was given, so tests can run against shared servers
// without seeing each other's data.
//
// The servers are found through the environment:
//
//	XCLOAK_TEST_REDIS_URL      standalone Redis (falls back to XCLOAK_REDIS_URL,
//	                           then redis://127.0.0.1:6379/0)
//	XCLOAK_TEST_REDIS_CLUSTER  comma-separated host:port seeds of a Redis Cluster;
//	                           when unset, a cluster is started from redis-server
//	                           once per test process
//	XCLOAK_TEST_DATABASE_URL   Postgres server (falls back to XCLOAK_DATABASE_URL,
//	                           then postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
//
// A missing server fails the test with a message naming where it was looked
// for; tests are never skipped, because a skipped integration test looks like
// a passing one.
//
// Packages that use [ClusterAddrs] or [RedisCluster] should run their tests
// through [Main] so the cluster this package starts is stopped at the end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv
