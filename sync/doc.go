// Package sync holds the pure decision of etcdhook: a Metacontroller request (an EtcdCluster with its
// observed children and related Pods/PVCs) plus the current time in, the desired children and status out.
// The request is read once into facts.Facts (package sync/facts); the decision reads them and fills a
// render.Desired value (desired.go); package render turns it into the children.
// Nothing here performs I/O; see docs/design/05-request.md §5-§7 for the protocol this implements.
package sync
