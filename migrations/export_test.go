package migrations

// SetMaintenanceDatabases makes EnsureDatabase try names in place of the
// server's maintenance databases until restore is called.
func SetMaintenanceDatabases(names []string) (restore func()) {
	saved := maintenanceDatabases
	maintenanceDatabases = names
	return func() { maintenanceDatabases = saved }
}

// SetLockWait makes Up give up on the migration lock after polls polls
// of a second until restore is called.
func SetLockWait(polls uint64) (restore func()) {
	saved := lockPolls
	lockPolls = polls
	return func() { lockPolls = saved }
}
