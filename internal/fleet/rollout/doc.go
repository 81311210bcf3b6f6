// Package rollout decides a HostedClusterPackage's rollout: from the members the fleet observed
// (Member), its strategy and the partitions' last state, Decide says which members move to
// which revision now, which are held, blocked or failed, and when to look again (Plan). It is a
// pure function of what it is given, with the maintenance windows (Window), the unavailability
// budget, the members' health and the partition order it uses: it reads and writes no cluster,
// and imports nothing of the controller.
package rollout
