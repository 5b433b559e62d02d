package migrations

// SetMaintenanceDatabases makes EnsureDatabase try names in place of the
// server's maintenance databases until restore is called.
func SetMaintenanceDatabases(names []string) (restore func()) {
	saved := maintenanceDatabases
	maintenanceDatabases = names
	return func() { maintenanceDatabases = saved }
}
