#ifndef PAYD_SERVER_FAULT_H
#define PAYD_SERVER_FAULT_H
/* Fault injection for crash tests: PAYD_FAULT=name[,name…] makes fault_point(name) kill the
 * process on the spot (as kill -9 would), so tests can crash payd between two steps. */
void fault_point(const char *name);

#endif
