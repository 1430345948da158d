package io.mstar.transport.exceptions;

/**
 * The configuration cannot work: an environment value that does not parse or is out of range, or
 * sizes that the shared-memory directory cannot hold. The message names the variable, the value, what
 * is accepted and, where an operator can fix it, how.
 */
public class ConfigurationException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    public ConfigurationException(String message) {
        super(message);
    }
}
