// Package sync holds the pure decision of etcdhook: a Metacontroller request (an EtcdCluster with its
// observed children and related Pods/PVCs) plus the current time in, the desired children and status out.
// The request is read once into facts.Facts (package sync/facts); the decision reads them and fills a
// render.Desired value (desired.go) and a steps.Decision (package sync/steps); package render turns the
// first into the children and the second into the status (render.Status).
// Nothing here performs I/O; see docs/design/05-request.md §5-§7 for the protocol this implements.
package sync
