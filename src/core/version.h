#ifndef PAYD_CORE_VERSION_H
#define PAYD_CORE_VERSION_H
/* The version (CMake's project version) and the git revision this build was made from
 * ("unknown" outside a git checkout, "-dirty" when it had uncommitted changes); written by
 * cmake/version.cmake at every build. */
extern const char payd_version[];
extern const char payd_revision[];

#endif
