package io.mstar.transport.cuda;

import com.sun.jna.Library;
import com.sun.jna.Native;

/** The stand-in's test hooks (the build points MSTAR_CUDART at it for every test JVM). */
public interface StandinControl extends Library {
    StandinControl INSTANCE = Native.load(System.getenv("MSTAR_CUDART"), StandinControl.class);

    void mstarStandinSetCopyDelayUs(long us);

    long mstarStandinCopiesDone();

    long mstarStandinCopiesStarted();

    long mstarStandinRegisteredRanges();

    long mstarStandinEventSyncs();

    long mstarStandinDefaultStreamSyncs();
}
