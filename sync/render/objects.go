package render

// Objects are every child of Desired, typed, in the answer's order: accounts and roles, the ConfigMap,
// the Services, the StatefulSet, the PDB, the member Leases, the backup children, the NetworkPolicy,
// then the Jobs by name.
func Objects(d *Desired) []any {
	objs := RBAC(d)
	objs = append(objs, ConfigMap(d))
	for _, s := range Services(d) {
		objs = append(objs, s)
	}
	objs = append(objs, StatefulSet(d), PDB(d))
	for _, l := range Leases(d) {
		objs = append(objs, l)
	}
	objs = append(objs, BackupObjects(d)...)
	objs = append(objs, StandbyObjects(d)...)
	if np := NetworkPolicy(d); np != nil {
		objs = append(objs, np)
	}
	for _, j := range Jobs(d) {
		objs = append(objs, j)
	}
	return objs
}
