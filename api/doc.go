// Package api is the contract between the hook and the agent, and between etcdhook and its users: the
// EtcdCluster resource (types and the defaults its CRD applies), the member Lease protocol (the hook's
// intent annotations, the agent's report annotations, roles, reasons, member and cluster IDs), the agent's
// configuration file, and the names, labels, ports and paths both sides derive from a cluster's name.
// Both sync (the hook's decisions) and membership (the agent) import it; neither imports the other.
// docs/design/03-member-lease.md §3 describes the protocol; manifests/crd.yaml must agree with the types.
package api
