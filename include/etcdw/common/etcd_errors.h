// The errors etcd returns to clients: gRPC code plus the exact message. Clients (the Go client's
// rpctypes, kube-apiserver) recognise errors by this text, so it must never change.
#pragma once

#include "etcdw/common/status.h"

namespace etcdw::errors {

#define ETCDW_ETCD_ERROR(name, code, text) \
  inline Status name() { return Status(Code::code, text); }

// KV and MVCC
ETCDW_ETCD_ERROR(EmptyKey, kInvalidArgument, "etcdserver: key is not provided")
ETCDW_ETCD_ERROR(KeyNotFound, kInvalidArgument, "etcdserver: key not found")
ETCDW_ETCD_ERROR(ValueProvided, kInvalidArgument, "etcdserver: value is provided")
ETCDW_ETCD_ERROR(LeaseProvided, kInvalidArgument, "etcdserver: lease is provided")
ETCDW_ETCD_ERROR(TooManyOps, kInvalidArgument, "etcdserver: too many operations in txn request")
ETCDW_ETCD_ERROR(DuplicateKey, kInvalidArgument, "etcdserver: duplicate key given in txn request")
ETCDW_ETCD_ERROR(Compacted, kOutOfRange, "etcdserver: mvcc: required revision has been compacted")
ETCDW_ETCD_ERROR(FutureRev, kOutOfRange, "etcdserver: mvcc: required revision is a future revision")
ETCDW_ETCD_ERROR(NoSpace, kResourceExhausted, "etcdserver: mvcc: database space exceeded")
ETCDW_ETCD_ERROR(RequestTooLarge, kInvalidArgument, "etcdserver: request is too large")
ETCDW_ETCD_ERROR(TooManyRequests, kResourceExhausted, "etcdserver: too many requests")

// Lease and watch
ETCDW_ETCD_ERROR(LeaseNotFound, kNotFound, "etcdserver: requested lease not found")
ETCDW_ETCD_ERROR(LeaseExist, kFailedPrecondition, "etcdserver: lease already exists")
ETCDW_ETCD_ERROR(LeaseTTLTooLarge, kOutOfRange, "etcdserver: too large lease TTL")
ETCDW_ETCD_ERROR(WatchCanceled, kCanceled, "etcdserver: watch canceled")

// Cluster
ETCDW_ETCD_ERROR(MemberExist, kFailedPrecondition, "etcdserver: member ID already exist")
ETCDW_ETCD_ERROR(PeerURLExist, kFailedPrecondition, "etcdserver: Peer URLs already exists")
ETCDW_ETCD_ERROR(MemberNotEnoughStarted, kFailedPrecondition,
                 "etcdserver: re-configuration failed due to not enough started members")
ETCDW_ETCD_ERROR(MemberBadURLs, kInvalidArgument, "etcdserver: given member URLs are invalid")
ETCDW_ETCD_ERROR(MemberNotFound, kNotFound, "etcdserver: member not found")
ETCDW_ETCD_ERROR(MemberNotLearner, kFailedPrecondition,
                 "etcdserver: can only promote a learner member")
ETCDW_ETCD_ERROR(LearnerNotReady, kFailedPrecondition,
                 "etcdserver: can only promote a learner member which is in sync with leader")
ETCDW_ETCD_ERROR(TooManyLearners, kFailedPrecondition,
                 "etcdserver: too many learner members in cluster")
ETCDW_ETCD_ERROR(ClusterIdMismatch, kFailedPrecondition, "etcdserver: cluster ID mismatch")

// Auth
ETCDW_ETCD_ERROR(RootUserNotExist, kFailedPrecondition, "etcdserver: root user does not exist")
ETCDW_ETCD_ERROR(RootRoleNotExist, kFailedPrecondition,
                 "etcdserver: root user does not have root role")
ETCDW_ETCD_ERROR(UserAlreadyExist, kFailedPrecondition, "etcdserver: user name already exists")
ETCDW_ETCD_ERROR(UserEmpty, kInvalidArgument, "etcdserver: user name is empty")
ETCDW_ETCD_ERROR(UserNotFound, kFailedPrecondition, "etcdserver: user name not found")
ETCDW_ETCD_ERROR(RoleAlreadyExist, kFailedPrecondition, "etcdserver: role name already exists")
ETCDW_ETCD_ERROR(RoleNotFound, kFailedPrecondition, "etcdserver: role name not found")
ETCDW_ETCD_ERROR(RoleEmpty, kInvalidArgument, "etcdserver: role name is empty")
ETCDW_ETCD_ERROR(AuthFailed, kInvalidArgument,
                 "etcdserver: authentication failed, invalid user ID or password")
ETCDW_ETCD_ERROR(PermissionDenied, kPermissionDenied, "etcdserver: permission denied")
ETCDW_ETCD_ERROR(RoleNotGranted, kFailedPrecondition, "etcdserver: role is not granted to the user")
ETCDW_ETCD_ERROR(PermissionNotGranted, kFailedPrecondition,
                 "etcdserver: permission is not granted to the role")
ETCDW_ETCD_ERROR(AuthNotEnabled, kFailedPrecondition, "etcdserver: authentication is not enabled")
ETCDW_ETCD_ERROR(InvalidAuthToken, kUnauthenticated, "etcdserver: invalid auth token")
ETCDW_ETCD_ERROR(InvalidAuthMgmt, kInvalidArgument, "etcdserver: invalid auth management")
ETCDW_ETCD_ERROR(AuthOldRevision, kInvalidArgument, "etcdserver: revision of auth store is old")
// Not among etcd's gRPC errors: it reaches clients as code Unknown with the auth package's text.
ETCDW_ETCD_ERROR(NoPasswordUser, kUnknown,
                 "auth: authentication failed, password was given for no password user")
ETCDW_ETCD_ERROR(JwtVerifyOnly, kUnknown, "auth: token signing attempted with verify-only key")

// Leadership and availability
ETCDW_ETCD_ERROR(NoLeader, kUnavailable, "etcdserver: no leader")
ETCDW_ETCD_ERROR(NotLeader, kFailedPrecondition, "etcdserver: not leader")
ETCDW_ETCD_ERROR(LeaderChanged, kUnavailable, "etcdserver: leader changed")
ETCDW_ETCD_ERROR(NotCapable, kUnavailable, "etcdserver: not capable")
ETCDW_ETCD_ERROR(Stopped, kUnavailable, "etcdserver: server stopped")
ETCDW_ETCD_ERROR(Timeout, kUnavailable, "etcdserver: request timed out")
ETCDW_ETCD_ERROR(TimeoutDueToLeaderFail, kUnavailable,
                 "etcdserver: request timed out, possibly due to previous leader failure")
ETCDW_ETCD_ERROR(TimeoutDueToConnectionLost, kUnavailable,
                 "etcdserver: request timed out, possibly due to connection lost")
ETCDW_ETCD_ERROR(TimeoutWaitAppliedIndex, kUnavailable,
                 "etcdserver: request timed out, waiting for the applied index took too long")
ETCDW_ETCD_ERROR(Unhealthy, kUnavailable, "etcdserver: unhealthy cluster")
ETCDW_ETCD_ERROR(Corrupt, kDataLoss, "etcdserver: corrupt cluster")
ETCDW_ETCD_ERROR(NotSupportedForLearner, kUnavailable, "etcdserver: rpc not supported for learner")
ETCDW_ETCD_ERROR(BadLeaderTransferee, kFailedPrecondition, "etcdserver: bad leader transferee")
ETCDW_ETCD_ERROR(Canceled, kCanceled, "etcdserver: request canceled")
ETCDW_ETCD_ERROR(DeadlineExceeded, kDeadlineExceeded, "etcdserver: context deadline exceeded")

#undef ETCDW_ETCD_ERROR

}  // namespace etcdw::errors
